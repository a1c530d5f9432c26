package consensus

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogBridge is the one adapter from hashicorp/raft's hclog.Logger to the node's slog.Logger.
// Levels map one to one (trace becomes slog's debug level minus four); names become a "logger"
// attribute.
type hclogBridge struct {
	log  *slog.Logger
	name string
	args []any
	// alone is set for a node bootstrapped as the only voter: raft's warning that no leader was
	// heard from before its first election is what every start of a standalone server does, so
	// it is logged at info level.
	alone bool
}

// electionStart is raft's message when a follower's heartbeat timeout passes.
const electionStart = "heartbeat timeout reached, starting election"

var _ hclog.Logger = (*hclogBridge)(nil)

func newHclog(l *slog.Logger, name string) hclog.Logger {
	return &hclogBridge{log: l.With("logger", name), name: name}
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (b *hclogBridge) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Warn && b.alone && msg == electionStart {
		level = hclog.Info
	}
	for i, a := range args {
		// hclog.Fmt values are a format and its arguments, rendered by hclog's own writer.
		if f, ok := a.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				args[i] = fmt.Sprintf(format, f[1:]...)
			}
		}
	}
	b.log.Log(context.Background(), slogLevel(level), msg, args...)
}
func (b *hclogBridge) Trace(msg string, args ...any) { b.Log(hclog.Trace, msg, args...) }
func (b *hclogBridge) Debug(msg string, args ...any) { b.Log(hclog.Debug, msg, args...) }
func (b *hclogBridge) Info(msg string, args ...any)  { b.Log(hclog.Info, msg, args...) }
func (b *hclogBridge) Warn(msg string, args ...any)  { b.Log(hclog.Warn, msg, args...) }
func (b *hclogBridge) Error(msg string, args ...any) { b.Log(hclog.Error, msg, args...) }

func (b *hclogBridge) enabled(l hclog.Level) bool {
	return b.log.Enabled(context.Background(), slogLevel(l))
}
func (b *hclogBridge) IsTrace() bool { return b.enabled(hclog.Trace) }
func (b *hclogBridge) IsDebug() bool { return b.enabled(hclog.Debug) }
func (b *hclogBridge) IsInfo() bool  { return b.enabled(hclog.Info) }
func (b *hclogBridge) IsWarn() bool  { return b.enabled(hclog.Warn) }
func (b *hclogBridge) IsError() bool { return b.enabled(hclog.Error) }

func (b *hclogBridge) ImpliedArgs() []any { return b.args }

func (b *hclogBridge) With(args ...any) hclog.Logger {
	return &hclogBridge{log: b.log.With(args...), name: b.name, args: append(append([]any(nil), b.args...), args...), alone: b.alone}
}

func (b *hclogBridge) Name() string { return b.name }

func (b *hclogBridge) Named(name string) hclog.Logger {
	full := name
	if b.name != "" {
		full = b.name + "." + name
	}
	return &hclogBridge{log: b.log.With("logger", full), name: full, args: b.args, alone: b.alone}
}

func (b *hclogBridge) ResetNamed(name string) hclog.Logger {
	return &hclogBridge{log: b.log.With("logger", name), name: name, args: b.args, alone: b.alone}
}

// SetLevel is ignored: the slog handler decides what is written.
func (b *hclogBridge) SetLevel(hclog.Level) {}

func (b *hclogBridge) GetLevel() hclog.Level {
	switch {
	case b.IsTrace():
		return hclog.Trace
	case b.IsDebug():
		return hclog.Debug
	case b.IsInfo():
		return hclog.Info
	case b.IsWarn():
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func (b *hclogBridge) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(b.StandardWriter(opts), "", 0)
}

func (b *hclogBridge) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return slogWriter{b.log}
}

// slogWriter turns lines written by the standard logger (FileSnapshotStore uses one) into slog
// records at info level.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	msg := string(p)
	for len(msg) > 0 && (msg[len(msg)-1] == '\n' || msg[len(msg)-1] == '\r') {
		msg = msg[:len(msg)-1]
	}
	w.log.Info(msg)
	return len(p), nil
}
