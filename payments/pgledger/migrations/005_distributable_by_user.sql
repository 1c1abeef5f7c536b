-- Every table distributable by the user (docs/operations.md, "Running on
-- Citus"), and, when the migration is asked for partitions
-- (pgledger.MigrateConfig.Partitions, paymentsd migrate --partitions),
-- every table but api_keys hash-partitioned by user.
--
-- One type for the user: text, as in the key table, whose user is the
-- library's scope, any string. Rows of one user then hash alike in every
-- table, so a deposit's ledger writes and its key's completion land on one
-- shard (co-location) instead of being a two-shard commit. Users are still
-- made with UUIDs; text compares them byte for byte.
ALTER TABLE api_keys DROP CONSTRAINT api_keys_user_id_fkey;
ALTER TABLE balances DROP CONSTRAINT balances_user_id_fkey;
ALTER TABLE deposits DROP CONSTRAINT deposits_user_id_fkey;
ALTER TABLE transactions DROP CONSTRAINT transactions_user_id_fkey;
ALTER TABLE payouts DROP CONSTRAINT payouts_user_id_fkey;
ALTER TABLE ledger_entries
    DROP CONSTRAINT ledger_entries_user_id_currency_fkey,
    DROP CONSTRAINT ledger_entries_user_id_deposit_id_fkey,
    DROP CONSTRAINT ledger_entries_user_id_transaction_id_fkey,
    DROP CONSTRAINT ledger_entries_user_id_payout_id_fkey;

ALTER TABLE users ALTER COLUMN id TYPE text;
ALTER TABLE api_keys ALTER COLUMN user_id TYPE text;
ALTER TABLE balances ALTER COLUMN user_id TYPE text;
ALTER TABLE deposits ALTER COLUMN user_id TYPE text;
ALTER TABLE transactions ALTER COLUMN user_id TYPE text;
ALTER TABLE payouts ALTER COLUMN user_id TYPE text;
ALTER TABLE ledger_entries ALTER COLUMN user_id TYPE text;

-- api_keys is looked up by the key's hash before the user is known: on
-- Citus a reference table, copied to every node, which may not reference a
-- distributed table. Every other foreign key holds the user, so it stays
-- within one shard.
ALTER TABLE balances ADD FOREIGN KEY (user_id) REFERENCES users (id);
ALTER TABLE deposits ADD FOREIGN KEY (user_id) REFERENCES users (id);
ALTER TABLE transactions ADD FOREIGN KEY (user_id) REFERENCES users (id);
ALTER TABLE payouts ADD FOREIGN KEY (user_id) REFERENCES users (id);
ALTER TABLE ledger_entries
    ADD FOREIGN KEY (user_id, currency) REFERENCES balances (user_id, currency),
    ADD FOREIGN KEY (user_id, deposit_id) REFERENCES deposits (user_id, id),
    ADD FOREIGN KEY (user_id, transaction_id) REFERENCES transactions (user_id, id),
    ADD FOREIGN KEY (user_id, payout_id) REFERENCES payouts (user_id, id);

-- A unique index must hold the distribution column to be checked on one
-- shard. A bank key is derived from the request's key, which is the
-- user's: unique per user is what it always was.
ALTER TABLE payouts
    DROP CONSTRAINT payouts_bank_key_key,
    ADD CONSTRAINT payouts_bank_key_key UNIQUE (user_id, bank_key);

-- The partitions, when asked for: each table is made again, partitioned by
-- its user column, with the same columns, checks, keys and indexes. Only an
-- empty wallet is partitioned (choose partitions at the first migration):
-- rows are not moved.
DO $$
DECLARE
    partitions constant integer := 0;
    tables constant text[] := ARRAY['users', 'balances', 'deposits', 'transactions', 'payouts', 'ledger_entries'];
    t text;
    def record;
BEGIN
    IF partitions = 0 THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT FROM users) THEN
        RAISE EXCEPTION 'the wallet holds users: only an empty wallet is partitioned (migrate with partitions first)';
    END IF;
    -- Keys, unique constraints, foreign keys and indexes, as they are now.
    CREATE TEMPORARY TABLE wallet_definitions ON COMMIT DROP AS
    SELECT conrelid::regclass::text AS tbl,
           format('ALTER TABLE %s ADD CONSTRAINT %I %s', conrelid::regclass, conname, pg_get_constraintdef(oid)) AS sql,
           CASE contype WHEN 'f' THEN 2 ELSE 1 END AS ord
      FROM pg_constraint
     WHERE conrelid = ANY (tables::regclass[]) AND contype IN ('p', 'u', 'f')
    UNION ALL
    SELECT indrelid::regclass::text, pg_get_indexdef(indexrelid), 3
      FROM pg_index
     WHERE indrelid = ANY (tables::regclass[])
       AND NOT EXISTS (SELECT FROM pg_constraint WHERE conindid = indexrelid);
    FOREACH t IN ARRAY tables LOOP
        EXECUTE format('ALTER TABLE %I RENAME TO %I', t, t || '_unpartitioned');
        EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY) PARTITION BY HASH (%I)',
                       t, t || '_unpartitioned', CASE t WHEN 'users' THEN 'id' ELSE 'user_id' END);
        FOR i IN 0 .. partitions - 1 LOOP
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS %s, REMAINDER %s)',
                           t || '_p' || i, t, partitions, i);
        END LOOP;
    END LOOP;
    FOREACH t IN ARRAY tables LOOP
        EXECUTE format('DROP TABLE %I CASCADE', t || '_unpartitioned');
    END LOOP;
    FOR def IN SELECT sql FROM wallet_definitions ORDER BY ord, array_position(tables, tbl) LOOP
        EXECUTE def.sql;
    END LOOP;
END
$$;
