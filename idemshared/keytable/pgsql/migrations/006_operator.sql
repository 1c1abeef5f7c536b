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
-- key, when, why, and the record before and after. Never deleted by the
-- sweeper: it outlives the records it names.
CREATE TABLE idempotency_keys_audit (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at              timestamptz NOT NULL DEFAULT now(),
    actor           text        NOT NULL,
    action          text        NOT NULL,
    reason          text        NOT NULL,
    user_id         text        NOT NULL,
    idempotency_key text        NOT NULL,
    before          text        NOT NULL,
    after           text        NOT NULL
);
CREATE INDEX idempotency_keys_audit_key_idx ON idempotency_keys_audit (user_id, idempotency_key, id);
