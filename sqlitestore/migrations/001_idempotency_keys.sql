-- One row per (user, key): the claim, the fingerprint of the request that
-- made it, its lock, and the stored final response. The columns are
-- pgstore's; the types are SQLite's, in a STRICT table so a value of the
-- wrong type is refused rather than stored.
--
-- Times are INTEGER microseconds since the Unix epoch, UTC: the precision of
-- PostgreSQL's timestamptz, compared and added to as plain integers.
CREATE TABLE idempotency_keys (
    user_id             TEXT    NOT NULL,
    idempotency_key     TEXT    NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    request_method      TEXT    NOT NULL,
    request_path        TEXT    NOT NULL,
    request_hash        BLOB    NOT NULL CHECK (length(request_hash) = 32),
    fingerprint_version INTEGER NOT NULL,
    status              TEXT    NOT NULL CHECK (status IN ('PROCESSING', 'COMPLETED', 'FAILED')),
    attempts            INTEGER NOT NULL DEFAULT 1,
    -- The fencing token (a UUID in its canonical text form): every write to
    -- the row names the attempt that holds it.
    lock_token          TEXT    NOT NULL,
    locked_at           INTEGER NOT NULL,
    lock_expires_at     INTEGER NOT NULL,
    response_code       INTEGER,
    -- Only the allow-listed headers, as a JSON object; the body is kept as
    -- bytes, so a replay is byte-identical.
    response_headers    TEXT,
    response_body       BLOB,
    resource_type       TEXT,
    resource_id         TEXT,
    created_at          INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    expires_at          INTEGER NOT NULL,
    PRIMARY KEY (user_id, idempotency_key),
    CHECK (status <> 'COMPLETED' OR response_code IS NOT NULL)
) STRICT;

-- Cleanup finds every row past its retention, whatever its status: no
-- partial index, so an abandoned PROCESSING row cannot live forever.
CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);
