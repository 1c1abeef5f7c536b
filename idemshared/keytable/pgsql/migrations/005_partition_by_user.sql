-- The key table hash-partitioned by user, when the migration is asked for
-- partitions (pgstore.MigrateConfig.Partitions, paymentsd migrate
-- --partitions): else nothing changes. The primary key holds the partition
-- key, so the claim stays one unique index per partition; every statement
-- a request runs names its user, so it reaches one partition, as it would
-- one shard of a table Citus distributes by user_id (docs/operations.md,
-- "Running on Citus"). An index added later is created on the parent and
-- reaches every partition; a unique one must hold user_id.
--
-- Existing rows are copied into the partitions under the table's lock: on
-- a large table, choose partitions at the first migration.
DO $$
DECLARE
    partitions constant integer := 0;
BEGIN
    IF partitions = 0 THEN
        RETURN;
    END IF;
    ALTER TABLE idempotency_keys RENAME TO idempotency_keys_unpartitioned;
    CREATE TABLE idempotency_keys
        (LIKE idempotency_keys_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
        PARTITION BY HASH (user_id);
    FOR i IN 0 .. partitions - 1 LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF idempotency_keys FOR VALUES WITH (MODULUS %s, REMAINDER %s)',
                       'idempotency_keys_p' || i, partitions, i);
    END LOOP;
    INSERT INTO idempotency_keys SELECT * FROM idempotency_keys_unpartitioned;
    DROP TABLE idempotency_keys_unpartitioned;
    ALTER TABLE idempotency_keys ADD PRIMARY KEY (user_id, idempotency_key);
    CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);
    CREATE INDEX idempotency_keys_unfinished_idx ON idempotency_keys (claimed_at)
        WHERE recovery_point IS NOT NULL AND status <> 'COMPLETED';
END
$$;
