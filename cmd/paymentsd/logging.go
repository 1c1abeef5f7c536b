package main

import (
	"errors"
	"io"
	"log/slog"
	"strings"
)

// newLogger returns serve's logger: every line it prints, from the
// listening line to the last error, is in format (text or json).
func newLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError("serve: --log-format %q: want text or json", format)
}

// levelFlag is --log-level: slog's level names, with an error that names
// them.
type levelFlag struct{ l *slog.Level }

func (f levelFlag) String() string {
	if f.l == nil {
		return slog.LevelInfo.String()
	}
	return strings.ToLower(f.l.String())
}

func (f levelFlag) Set(s string) error {
	switch strings.ToLower(s) {
	case "debug":
		*f.l = slog.LevelDebug
	case "info":
		*f.l = slog.LevelInfo
	case "warn", "warning":
		*f.l = slog.LevelWarn
	case "error":
		*f.l = slog.LevelError
	default:
		return errors.New("want debug, info, warn or error")
	}
	return nil
}
