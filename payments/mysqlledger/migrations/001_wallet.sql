-- The wallet: users and their API keys, balances, deposits, transactions,
-- payouts and the ledger entries they make. The tables, columns and nets
-- are pgledger's as its migrations 001 to 004 leave them; the types are
-- InnoDB's.
--
-- Text is compared byte for byte (utf8mb4_bin), as in PostgreSQL: a bank
-- key that differs only in case is another key. Ids are UUIDs in their
-- lower-case text form. Times are DATETIME(6) in UTC, written from
-- UTC_TIMESTAMP(6) by every insert. Amounts are BIGINT minor units.
--
-- Each table is one statement and made only when missing: MySQL commits
-- DDL statement by statement, so a migration cut off halfway is run again.

CREATE TABLE IF NOT EXISTS users (
    id         CHAR(36)    NOT NULL PRIMARY KEY,
    created_at DATETIME(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Only the SHA-256 of a key is kept: a 256-bit random key needs no salt.
CREATE TABLE IF NOT EXISTS api_keys (
    key_hash   VARBINARY(32) NOT NULL PRIMARY KEY,
    user_id    CHAR(36)      NOT NULL,
    created_at DATETIME(6)   NOT NULL,
    KEY api_keys_user_id_idx (user_id),
    CONSTRAINT api_keys_user_fk FOREIGN KEY (user_id) REFERENCES users (id),
    CONSTRAINT api_keys_key_hash_check CHECK (LENGTH(key_hash) = 32)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A balance is the sum of its ledger entries, kept here and updated in the
-- same transaction as they are.
CREATE TABLE IF NOT EXISTS balances (
    user_id    CHAR(36)    NOT NULL,
    currency   CHAR(3)     NOT NULL,
    amount     BIGINT      NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    PRIMARY KEY (user_id, currency),
    CONSTRAINT balances_user_fk FOREIGN KEY (user_id) REFERENCES users (id),
    CONSTRAINT balances_currency_check CHECK (currency REGEXP '^[A-Z]{3}$'),
    CONSTRAINT balances_amount_check CHECK (amount >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The minute net: at most one deposit per user, currency and amount per
-- UTC calendar minute, so the same deposit sent several times with several
-- keys (or none) credits once. InnoDB indexes no expression: the minute is
-- a stored generated column. The idempotency_key column is plain data for
-- support: no index binds a key (whether a request runs is the idem
-- middleware's decision, on its own key record).
CREATE TABLE IF NOT EXISTS deposits (
    user_id         CHAR(36)     NOT NULL,
    id              CHAR(36)     NOT NULL,
    currency        CHAR(3)      NOT NULL,
    amount          BIGINT       NOT NULL,
    idempotency_key VARCHAR(255),
    created_at      DATETIME(6)  NOT NULL,
    created_minute  BIGINT AS (TIMESTAMPDIFF(MINUTE, '1970-01-01 00:00:00', created_at)) STORED,
    PRIMARY KEY (user_id, id),
    UNIQUE KEY deposits_minute_net (user_id, currency, amount, created_minute),
    CONSTRAINT deposits_user_fk FOREIGN KEY (user_id) REFERENCES users (id),
    CONSTRAINT deposits_currency_check CHECK (currency REGEXP '^[A-Z]{3}$'),
    CONSTRAINT deposits_amount_check CHECK (amount > 0),
    CONSTRAINT deposits_key_check CHECK (LENGTH(idempotency_key) BETWEEN 1 AND 255)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The minute net of transactions counts live ones only: a CANCELLED or
-- FAILED transaction's live_minute is NULL, which a unique index lets
-- repeat (PostgreSQL's partial index).
CREATE TABLE IF NOT EXISTS transactions (
    user_id          CHAR(36)       NOT NULL,
    id               CHAR(36)       NOT NULL,
    source_currency  CHAR(3)        NOT NULL,
    target_currency  CHAR(3)        NOT NULL,
    amount           BIGINT         NOT NULL,
    converted_amount BIGINT         NOT NULL,
    -- Target units per source major unit, exactly as applied: money's
    -- rates have at most 18 decimals, read back without trailing zeros.
    rate             DECIMAL(38, 18) NOT NULL,
    status           VARCHAR(10)    NOT NULL,
    idempotency_key  VARCHAR(255),
    created_at       DATETIME(6)    NOT NULL,
    live_minute      BIGINT AS (IF(status IN ('CANCELLED', 'FAILED'), NULL,
                                   TIMESTAMPDIFF(MINUTE, '1970-01-01 00:00:00', created_at))) STORED,
    PRIMARY KEY (user_id, id),
    UNIQUE KEY transactions_minute_net (user_id, source_currency, target_currency, amount, live_minute),
    CONSTRAINT transactions_user_fk FOREIGN KEY (user_id) REFERENCES users (id),
    CONSTRAINT transactions_source_check CHECK (source_currency REGEXP '^[A-Z]{3}$'),
    CONSTRAINT transactions_target_check CHECK (target_currency REGEXP '^[A-Z]{3}$'),
    CONSTRAINT transactions_pair_check CHECK (source_currency <> target_currency),
    CONSTRAINT transactions_amount_check CHECK (amount > 0),
    CONSTRAINT transactions_converted_check CHECK (converted_amount > 0),
    CONSTRAINT transactions_rate_check CHECK (rate > 0),
    CONSTRAINT transactions_status_check CHECK (status IN ('PENDING', 'COMPLETED', 'FAILED', 'CANCELLED')),
    CONSTRAINT transactions_key_check CHECK (LENGTH(idempotency_key) BETWEEN 1 AND 255)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Payouts: money sent out of a balance to an account at the bank. The
-- payout is debited when it is made (a ledger entry), pending until the
-- bank's outcome is known, then paid, or failed and refunded (a second
-- entry, never a delete). bank_key is the key the payout is sent to the
-- bank with (idem.ProviderKey): one per payout.
CREATE TABLE IF NOT EXISTS payouts (
    user_id          CHAR(36)     NOT NULL,
    id               CHAR(36)     NOT NULL,
    currency         CHAR(3)      NOT NULL,
    amount           BIGINT       NOT NULL,
    destination      VARCHAR(255) NOT NULL,
    status           VARCHAR(10)  NOT NULL,
    bank_key         VARCHAR(255) NOT NULL,
    bank_transfer_id VARCHAR(255),
    idempotency_key  VARCHAR(255),
    created_at       DATETIME(6)  NOT NULL,
    updated_at       DATETIME(6)  NOT NULL,
    PRIMARY KEY (user_id, id),
    UNIQUE KEY payouts_bank_key (bank_key),
    CONSTRAINT payouts_user_fk FOREIGN KEY (user_id) REFERENCES users (id),
    CONSTRAINT payouts_currency_check CHECK (currency REGEXP '^[A-Z]{3}$'),
    CONSTRAINT payouts_amount_check CHECK (amount > 0),
    CONSTRAINT payouts_destination_check CHECK (LENGTH(destination) BETWEEN 1 AND 255),
    CONSTRAINT payouts_status_check CHECK (status IN ('pending', 'paid', 'failed')),
    CONSTRAINT payouts_paid_check CHECK (status <> 'paid' OR bank_transfer_id IS NOT NULL),
    CONSTRAINT payouts_key_check CHECK (LENGTH(idempotency_key) BETWEEN 1 AND 255)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Each row changes one balance: a deposit's credit, a transaction's debit
-- (negative) or credit, a payout's debit or refund.
CREATE TABLE IF NOT EXISTS ledger_entries (
    id             BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    user_id        CHAR(36)    NOT NULL,
    currency       CHAR(3)     NOT NULL,
    amount         BIGINT      NOT NULL,
    deposit_id     CHAR(36),
    transaction_id CHAR(36),
    payout_id      CHAR(36),
    created_at     DATETIME(6) NOT NULL,
    KEY ledger_entries_user_idx (user_id, currency),
    KEY ledger_entries_deposit_idx (user_id, deposit_id),
    KEY ledger_entries_transaction_idx (user_id, transaction_id),
    KEY ledger_entries_payout_idx (user_id, payout_id),
    CONSTRAINT ledger_entries_balance_fk FOREIGN KEY (user_id, currency) REFERENCES balances (user_id, currency),
    CONSTRAINT ledger_entries_deposit_fk FOREIGN KEY (user_id, deposit_id) REFERENCES deposits (user_id, id),
    CONSTRAINT ledger_entries_transaction_fk FOREIGN KEY (user_id, transaction_id) REFERENCES transactions (user_id, id),
    CONSTRAINT ledger_entries_payout_fk FOREIGN KEY (user_id, payout_id) REFERENCES payouts (user_id, id),
    CONSTRAINT ledger_entries_amount_check CHECK (amount <> 0),
    CONSTRAINT ledger_entries_one_movement
        CHECK ((deposit_id IS NOT NULL) + (transaction_id IS NOT NULL) + (payout_id IS NOT NULL) = 1)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
