package server

import (
	"context"
	"log/slog"
	"slices"
)

// lazyAttrs is a slog.Handler that keeps the attributes a logger is made with and gives them to
// the handler beneath only when a record is handled. slog's text and JSON handlers format
// attributes when WithAttrs is called; every connection makes a logger with its remote address,
// and another once its session is known, but most never log: under session churn the eager
// formatting was 2-3% of the server's CPU.
type lazyAttrs struct {
	h     slog.Handler
	attrs []slog.Attr
}

func (l *lazyAttrs) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l *lazyAttrs) Handle(ctx context.Context, r slog.Record) error {
	h := l.h
	if len(l.attrs) > 0 {
		h = h.WithAttrs(l.attrs)
	}
	return h.Handle(ctx, r)
}

func (l *lazyAttrs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &lazyAttrs{h: l.h, attrs: append(slices.Clip(l.attrs), attrs...)}
}

// WithGroup applies the kept attributes first: they belong outside the group.
func (l *lazyAttrs) WithGroup(name string) slog.Handler {
	h := l.h
	if len(l.attrs) > 0 {
		h = h.WithAttrs(l.attrs)
	}
	return &lazyAttrs{h: h.WithGroup(name)}
}
