// Package runtimepolicy holds the zkd binary's settings of the Go runtime, which belong to the
// whole process and therefore not to the embeddable server:
//
//   - collector pacing (gc.go): after each collection, the GC percent that leaves at least
//     64 MiB of headroom above a small live heap, and GOGC=100 above that; not when the
//     operator set GOGC;
//   - trimming (trim.go): once the process goes idle after a burst of allocation (a bulk load,
//     a restart's replay), one debug.FreeOSMemory that returns the free heap to the OS.
//
// Use: a program's main package calls Run once, in its own goroutine, and cancels its context
// before exiting; Run returns once both policies have stopped and the GC percent is restored.
// Libraries must not use it.
package runtimepolicy
