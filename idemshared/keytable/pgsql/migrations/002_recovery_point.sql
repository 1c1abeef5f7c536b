-- The recovery point of a handler split into phases (idem.Advance): the
-- last point committed, NULL for none. A record with a point that is not
-- COMPLETED is unfinished: it binds its key past retention, the sweeper
-- skips it, and a re-acquire resumes it in the same life.
ALTER TABLE idempotency_keys ADD COLUMN recovery_point text
    CHECK (recovery_point IS NULL OR length(recovery_point) BETWEEN 1 AND 255);

-- The completer's search: abandoned unfinished records, oldest hold first.
CREATE INDEX idempotency_keys_unfinished_idx ON idempotency_keys (locked_at)
    WHERE recovery_point IS NOT NULL AND status <> 'COMPLETED';
