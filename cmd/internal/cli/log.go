package cli

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
)

// Log is the logging flags every server has: --log-level, --log-format.
type Log struct {
	Level  slog.Level
	Format string
}

// Register adds --log-level and --log-format to fs.
func (l *Log) Register(fs *flag.FlagSet) {
	fs.Var(levelFlag{&l.Level}, "log-level", "the least level logged: debug, info, warn or error")
	fs.StringVar(&l.Format, "log-format", "text", "the format of every line logged: text (key=value) or json (one object a line)")
}

// Logger returns the logger the flags ask for, writing to w; cmd names the
// command in a usage error.
func (l *Log) Logger(w io.Writer, cmd string) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: l.Level}
	switch l.Format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, Usagef("%s: --log-format %q: want text or json", cmd, l.Format)
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
