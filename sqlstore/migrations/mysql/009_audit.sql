-- Operators' actions on records (store.AuditLog): who did what to which
-- key, when, why, and the record before and after. Never deleted by the
-- sweeper: it outlives the records it names. `at` is written from
-- UTC_TIMESTAMP(6), as every time of the key table.
CREATE TABLE IF NOT EXISTS idempotency_keys_audit (
    id              BIGINT          NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at              DATETIME(6)     NOT NULL,
    actor           TEXT            NOT NULL,
    action          TEXT            NOT NULL,
    reason          TEXT            NOT NULL,
    scope           VARBINARY(1020) NOT NULL,
    idempotency_key VARBINARY(1020) NOT NULL,
    `before`        TEXT            NOT NULL,
    `after`         TEXT            NOT NULL,
    KEY idempotency_keys_audit_key_idx (scope, idempotency_key, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
