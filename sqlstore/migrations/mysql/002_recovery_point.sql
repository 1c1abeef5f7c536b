-- The recovery point of a handler split into phases (idem.Advance): the
-- last point committed, NULL for none. A record with a point that is not
-- COMPLETED is unfinished: it binds its key past retention, the sweeper
-- skips it, and a re-acquire resumes it in the same life.
--
-- InnoDB has no partial index: unfinished_at is locked_at on an unfinished
-- row and NULL on every other, and its index is the completer's search,
-- abandoned unfinished records, oldest hold first. One statement, so the
-- migration is applied whole or not at all.
-- made when: SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'idempotency_keys' AND column_name = 'recovery_point'
ALTER TABLE idempotency_keys
    ADD COLUMN recovery_point VARCHAR(255) NULL,
    ADD COLUMN unfinished_at DATETIME(6)
        AS (IF(recovery_point IS NOT NULL AND status <> 'COMPLETED', locked_at, NULL)) STORED,
    ADD CONSTRAINT idempotency_keys_recovery_point
        CHECK (recovery_point IS NULL OR LENGTH(recovery_point) BETWEEN 1 AND 255),
    ADD KEY idempotency_keys_unfinished_idx (unfinished_at);
