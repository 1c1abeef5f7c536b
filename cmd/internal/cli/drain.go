package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Drain stops srv accepting and lets every in-flight request finish, and
// with it its key's completion, within timeout; past it the remaining
// connections are closed and Drain fails. It logs the start and the end.
func Drain(srv *http.Server, timeout time.Duration, logger *slog.Logger) error {
	logger.Info("shutting down: draining in-flight requests", "timeout", timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: in-flight requests did not finish within %v", timeout)
	}
	logger.Info("stopped")
	return nil
}
