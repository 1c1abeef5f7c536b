-- One row per (user, key): the claim, the fingerprint of the request that
-- made it, its lock, and the stored final response. The columns are
-- pgstore's; the types are InnoDB's.
--
-- The user and the key are bytes (VARBINARY): compared exactly, as in
-- PostgreSQL, where a PAD SPACE collation would make "k" and "k " one key.
-- Times are DATETIME(6) in UTC, written from UTC_TIMESTAMP(6).
CREATE TABLE idempotency_keys (
    user_id             VARBINARY(1020) NOT NULL,
    idempotency_key     VARBINARY(1020) NOT NULL,
    request_method      VARCHAR(16)     NOT NULL,
    request_path        TEXT            NOT NULL,
    request_hash        VARBINARY(32)   NOT NULL,
    fingerprint_version SMALLINT        NOT NULL,
    status              VARCHAR(10)     NOT NULL,
    attempts            INT             NOT NULL DEFAULT 1,
    -- The fencing token (a UUID in its canonical text form): every write to
    -- the row names the attempt that holds it.
    lock_token          CHAR(36)        NOT NULL,
    locked_at           DATETIME(6)     NOT NULL,
    lock_expires_at     DATETIME(6)     NOT NULL,
    response_code       INT,
    -- Only the allow-listed headers, as JSON text; the body is kept as
    -- bytes, so a replay is byte-identical.
    response_headers    LONGTEXT,
    response_body       LONGBLOB,
    resource_type       VARCHAR(255),
    resource_id         VARCHAR(255),
    created_at          DATETIME(6)     NOT NULL,
    expires_at          DATETIME(6)     NOT NULL,
    PRIMARY KEY (user_id, idempotency_key),
    -- Cleanup finds every row past its retention, whatever its status.
    KEY idempotency_keys_expires_at_idx (expires_at),
    CONSTRAINT idempotency_keys_key_length CHECK (LENGTH(idempotency_key) BETWEEN 1 AND 1020),
    CONSTRAINT idempotency_keys_hash_length CHECK (LENGTH(request_hash) = 32),
    CONSTRAINT idempotency_keys_status CHECK (status IN ('PROCESSING', 'COMPLETED', 'FAILED')),
    CONSTRAINT idempotency_keys_completed CHECK (status <> 'COMPLETED' OR response_code IS NOT NULL)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
