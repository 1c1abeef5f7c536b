-- Why a pending payout's bank outcome is unknown (pgledger's migration
-- 007 says more). NULL while no bank call has failed, and once the payout
-- is paid or failed. The ALTER is one statement, applied whole or not at
-- all.
ALTER TABLE payouts
    ADD COLUMN bank_outcome_cause VARCHAR(32) NULL,
    ADD CONSTRAINT payouts_bank_outcome_cause_check CHECK (status = 'pending' OR bank_outcome_cause IS NULL);
