-- The operator's searches (store.KeyLister): by key across users; by
-- status and age; and the completed records answered 4xx by status code
-- and age (idem-gateway's stored unknown outcomes are 409s), a partial
-- index that a 2xx completion never writes to. The primary key serves the
-- search by user, and idempotency_keys_unfinished_idx the unfinished
-- records.
CREATE INDEX IF NOT EXISTS idempotency_keys_key_idx ON idempotency_keys (idempotency_key);
CREATE INDEX IF NOT EXISTS idempotency_keys_status_created_idx ON idempotency_keys (status, created_at);
CREATE INDEX IF NOT EXISTS idempotency_keys_answered_4xx_idx ON idempotency_keys (response_code, created_at)
    WHERE status = 'COMPLETED' AND response_code >= 400;

-- Operators' actions on records (store.AuditLog): who did what to which
-- key, when (microseconds since the Unix epoch), why, and the record before
-- and after. Never deleted by the sweeper: it outlives the records it names.
CREATE TABLE idempotency_keys_audit (
    id              INTEGER PRIMARY KEY,
    at              INTEGER NOT NULL,
    actor           TEXT    NOT NULL,
    action          TEXT    NOT NULL,
    reason          TEXT    NOT NULL,
    user_id         TEXT    NOT NULL,
    idempotency_key TEXT    NOT NULL,
    before          TEXT    NOT NULL,
    after           TEXT    NOT NULL
) STRICT;
CREATE INDEX idempotency_keys_audit_key_idx ON idempotency_keys_audit (user_id, idempotency_key, id);
