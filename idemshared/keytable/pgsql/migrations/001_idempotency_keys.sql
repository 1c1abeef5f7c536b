-- One row per (user, key): the claim, the fingerprint of the request that
-- made it, its lock, and the stored final response.
CREATE TABLE idempotency_keys (
    user_id             text        NOT NULL,
    idempotency_key     text        NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    request_method      text        NOT NULL,
    request_path        text        NOT NULL,
    request_hash        bytea       NOT NULL CHECK (length(request_hash) = 32),
    fingerprint_version smallint    NOT NULL,
    status              text        NOT NULL CHECK (status IN ('PROCESSING', 'COMPLETED', 'FAILED')),
    attempts            integer     NOT NULL DEFAULT 1,
    -- The fencing token: every write to the row names the attempt that holds it.
    lock_token          uuid        NOT NULL,
    locked_at           timestamptz NOT NULL,
    lock_expires_at     timestamptz NOT NULL,
    response_code       integer,
    -- Only the allow-listed headers; the body is kept as bytes, never jsonb,
    -- so a replay is byte-identical.
    response_headers    jsonb,
    response_body       bytea,
    resource_type       text,
    resource_id         text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    expires_at          timestamptz NOT NULL,
    PRIMARY KEY (user_id, idempotency_key),
    CHECK (status <> 'COMPLETED' OR response_code IS NOT NULL)
);

-- Cleanup finds every row past its retention, whatever its status: no
-- partial index, so an abandoned PROCESSING row cannot live forever.
CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);
