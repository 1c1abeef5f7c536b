// Package payments is the multi-currency wallet behind paymentsd: users hold
// a balance per currency, deposit money and convert it between currencies.
//
// Money is int64 minor units (cents; whole yen), never floating point;
// conversions are exact (package money) and rounded down, so none creates
// value.
//
// Every movement is recorded as ledger entries: a deposit is one credit, a
// transaction one debit and one credit. A balance is the sum of its entries;
// it is also kept in a balance row, updated in the same database transaction
// as the entries, and never negative (the schema checks it too).
//
// Service holds all of the business logic: validation, conversion, the order
// in which balances are locked, the entries a movement makes. A Ledger is the
// small per-database part underneath it: package pgledger for PostgreSQL,
// sqliteledger for SQLite. Both pass the conformance suite in ledgertest.
//
// # Idempotency and the net
//
// paymentsd wraps the money-moving routes in the idem middleware, and a
// Ledger runs its writes inside the request's ambient transaction, so a
// movement and its idempotency key commit together. The business tables
// know nothing of keys: a deposit or transaction row keeps the request's
// Idempotency-Key as plain data for support, bound by no index, and never
// reads the key store. A key past its retention is free for a new request,
// however and whenever its record was swept.
//
// The business nets of their own are the minute nets: at most one live
// transaction per user, currency pair and amount, and one deposit per user,
// currency and amount, in each UTC calendar minute, so a path that forgot
// the middleware (or a retry with a fresh key) still cannot repeat a
// movement at once. A calendar minute, not a sliding window: two identical
// movements a moment apart across a minute boundary both go in. A net that
// fires is ErrDuplicateTransfer or ErrDuplicateDeposit (both ErrDuplicate),
// and nothing moves.
package payments
