-- Why a pending payout's bank outcome is unknown (pgledger's migration
-- 007 says more). NULL while no bank call has failed, and once the payout
-- is paid or failed.
ALTER TABLE payouts ADD COLUMN bank_outcome_cause TEXT
    CHECK (status = 'pending' OR bank_outcome_cause IS NULL);
