package idem

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
)

// Why a call to a downstream that cannot roll back (a bank, an upstream
// behind the gateway) left its outcome unknown: what UnknownCause returns,
// for the person who resolves the outcome (docs/problems.md,
// docs/payouts.md).
const (
	// CauseTimeout: no answer within the call's deadline.
	CauseTimeout = "timeout"
	// CauseReset: the connection was closed or reset before an answer.
	CauseReset = "reset"
	// CauseNoAnswer: any other failure once the request may have been
	// sent.
	CauseNoAnswer = "no-answer"
)

// UnknownCause classifies err, the failure of a call that may have reached
// the downstream, as CauseTimeout, CauseReset or CauseNoAnswer.
func UnknownCause(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return CauseTimeout
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed):
		return CauseReset
	}
	return CauseNoAnswer
}
