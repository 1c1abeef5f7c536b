-- The operator's searches (store.KeyLister): by key across users, and by
-- status and age. The primary key serves the search by user, and
-- idempotency_keys_unfinished_idx the unfinished records.
CREATE INDEX idempotency_keys_key_idx ON idempotency_keys (idempotency_key);
CREATE INDEX idempotency_keys_status_created_idx ON idempotency_keys (status, created_at);

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
