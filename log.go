package idem

import (
	"context"
	"log/slog"
)

// LogEvents returns an ObserveFunc that writes one log record per request
// that carried a key, message "idempotent request", with the attributes
// scope, key, method, path, route, mode, outcome, status and duration, and
// reacquired, renewals and error when they say something. A store error is
// logged at level Error; a lost lease or an abandoned request at Warn;
// everything else at Info. It never logs a request or response body: an
// Event holds none.
//
//	cfg.ObserveFunc = idem.LogEvents(slog.Default())
func LogEvents(logger *slog.Logger) func(Event) {
	return func(e Event) {
		level := slog.LevelInfo
		switch e.Outcome {
		case OutcomeStoreUnavailable:
			level = slog.LevelError
		case OutcomeLeaseLost, OutcomeAbandoned:
			level = slog.LevelWarn
		}
		ctx := context.Background()
		if !logger.Enabled(ctx, level) {
			return
		}
		attrs := make([]slog.Attr, 0, 12)
		attrs = append(attrs,
			slog.String("scope", e.Scope),
			slog.String("key", e.Key),
			slog.String("method", e.Method),
			slog.String("path", e.Path),
			slog.String("route", e.Route),
			slog.String("mode", e.Mode.String()),
			slog.String("outcome", string(e.Outcome)),
			slog.Int("status", e.StatusCode),
			slog.Duration("duration", e.Duration),
		)
		if e.Reacquired {
			attrs = append(attrs, slog.Bool("reacquired", true))
		}
		if e.Renewals > 0 {
			attrs = append(attrs, slog.Int("renewals", e.Renewals))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.String("error", e.Err.Error()))
		}
		logger.LogAttrs(ctx, level, "idempotent request", attrs...)
	}
}
