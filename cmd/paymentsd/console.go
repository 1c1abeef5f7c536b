package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/idem-dev/idem"
	"github.com/idem-dev/idem/cmd/internal/cli"
	"github.com/idem-dev/idem/completer"
	"github.com/idem-dev/idem/console"
	"github.com/idem-dev/idem/payments"
	"github.com/idem-dev/idem/store"
)

// payoutDetail is the console's view of what a key produced in paymentsd:
// the payout it made (found by the bank key recorded on its record, so a
// pending one shows too), or the deposit or transaction its answer names,
// with the ledger entries the ledger holds for it.
func payoutDetail(svc *payments.Service, lister store.Store) func(ctx context.Context, rec *store.Record) ([]console.Section, error) {
	return func(ctx context.Context, rec *store.Record) ([]console.Section, error) {
		if pk, err := lister.ProviderKeys(ctx, rec.Scope, rec.Key); err == nil && pk["bank"] != "" {
			p, err := svc.PayoutByBankKey(ctx, rec.Scope, pk["bank"])
			if errors.Is(err, payments.ErrNotFound) {
				return []console.Section{{Title: "Payout", Fields: []console.Field{{Name: "Payout", Value: "none recorded under bank key " + pk["bank"]}}}}, nil
			}
			if err != nil {
				return nil, fmt.Errorf("payout: %w", err)
			}
			return movementSection(ctx, svc, rec.Scope, payments.MovementPayout, p.ID, payoutFields(p))
		}
		resp := rec.Response
		if resp == nil || resp.ResourceID == "" {
			return nil, nil
		}
		var (
			m      payments.Movement
			fields []console.Field
		)
		switch resp.ResourceType {
		case "payouts":
			p, err := svc.GetPayout(ctx, rec.Scope, resp.ResourceID)
			if err != nil {
				return nil, fmt.Errorf("payout: %w", err)
			}
			m, fields = payments.MovementPayout, payoutFields(p)
		case "transactions":
			t, err := svc.GetTransaction(ctx, rec.Scope, resp.ResourceID)
			if err != nil {
				return nil, fmt.Errorf("transaction: %w", err)
			}
			m, fields = payments.MovementTransaction, []console.Field{
				{Name: "ID", Value: t.ID}, {Name: "Status", Value: string(t.Status)},
				{Name: "Rate", Value: t.Rate}, {Name: "Created", Value: t.CreatedAt.UTC().String()},
			}
		case "deposits":
			d, err := svc.GetDeposit(ctx, rec.Scope, resp.ResourceID)
			if err != nil {
				return nil, fmt.Errorf("deposit: %w", err)
			}
			m, fields = payments.MovementDeposit, []console.Field{{Name: "ID", Value: d.ID}, {Name: "Created", Value: d.CreatedAt.UTC().String()}}
		default:
			return nil, nil
		}
		return movementSection(ctx, svc, rec.Scope, m, resp.ResourceID, fields)
	}
}

// movementSection is a deposit's, transaction's or payout's section: its
// fields, and the ledger entries it wrote, read from the ledger.
func movementSection(ctx context.Context, svc *payments.Service, user string, m payments.Movement, id string, fields []console.Field) ([]console.Section, error) {
	es, err := svc.Entries(ctx, user, m, id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m, err)
	}
	rows := make([][]string, 0, len(es))
	for _, e := range es {
		rows = append(rows, []string{strconv.FormatInt(e.ID, 10), e.Currency, strconv.FormatInt(e.Amount, 10), e.CreatedAt.UTC().Format(time.RFC3339Nano)})
	}
	title := strings.ToUpper(string(m[:1])) + string(m[1:])
	return []console.Section{{Title: title, Fields: fields,
		Table: &console.Table{Columns: []string{"Ledger entry", "Currency", "Amount (minor units)", "Written"}, Rows: rows}}}, nil
}

func payoutFields(p payments.Payout) []console.Field {
	fields := []console.Field{
		{Name: "ID", Value: p.ID}, {Name: "Status", Value: string(p.Status)},
		{Name: "Amount", Value: strconv.FormatInt(p.Amount, 10) + " " + p.Currency + " (minor units)"},
		{Name: "Destination", Value: p.Destination}, {Name: "Bank key", Value: p.BankKey},
		{Name: "Bank transfer", Value: orDash(p.BankTransferID)},
	}
	if p.Status == payments.PayoutPending {
		fields = append(fields, console.Field{Name: "Why the bank outcome is unknown", Value: bankCauseText(p.BankOutcomeCause)})
	}
	return append(fields, console.Field{Name: "Created", Value: p.CreatedAt.UTC().String()})
}

// bankCauseText says what a payout's bank outcome cause means, for the
// console.
func bankCauseText(cause string) string {
	switch cause {
	case "":
		return "not recorded: no bank call of it has failed yet, or its attempt ended (its process died) before the bank answered"
	case idem.CauseTimeout:
		return "timeout: the bank sent no answer within --bank-timeout"
	case idem.CauseReset:
		return "reset: the connection to the bank closed before an answer"
	case idem.CauseNoAnswer:
		return "no answer: the call to the bank failed otherwise (refused, DNS, TLS); it may not have reached the bank"
	case payments.CauseCutAnswer:
		return "cut answer: the bank's status came, its transfer did not"
	case payments.CauseBankError:
		return "bank error: the bank answered without an outcome (an error status, or a transfer in no final state)"
	}
	return cause
}

// newConsole returns the operator console when --console-token-file is
// set, else nil. mw and comp return the service's middleware and
// completer, set once the console exists (the middleware reports its
// events to it).
func newConsole(f serveFlags, b *backend, svc *payments.Service, mw func() *idem.Middleware, comp func() *completer.Completer, logger *slog.Logger) (*console.Console, error) {
	if f.consoleToken == "" {
		return nil, nil
	}
	cfg := console.Config{
		Name: "paymentsd", Store: b.store, TokenFile: f.consoleToken, Logger: logger,
		RunbookURL:      "https://github.com/idem-dev/idem/blob/main/docs/operations.md#runbook-unknown-outcomes",
		ReplayCacheFunc: func() idem.ReplayCacheStats { return mw().ReplayCache() },
		ResumeFunc: func(ctx context.Context, u store.Unfinished) idem.Result {
			return comp().Resume(ctx, u)
		},
	}
	if f.bank == nil {
		cfg.ResumeFunc = nil // no completer runs without a bank
	}
	if b.store.Capabilities().Search {
		cfg.DetailFunc = payoutDetail(svc, b.store)
	}
	c, err := console.New(cfg)
	if err != nil {
		return nil, cli.Usagef("serve: --console-token-file: %v", err)
	}
	return c, nil
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
