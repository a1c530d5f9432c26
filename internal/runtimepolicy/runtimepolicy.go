package runtimepolicy

import (
	"context"
	"os"
)

// Run applies the policies until ctx ends. onTrim, if not nil, is told the resident heap bytes
// before and after each trim.
func Run(ctx context.Context, onTrim func(before, after uint64)) {
	if _, set := os.LookupEnv("GOGC"); !set {
		p := startGCPacer(gcHeadroom)
		defer p.stop()
	}
	trimLoop(ctx, trimDefaults(), onTrim)
}
