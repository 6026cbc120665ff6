-- Each document names the processing rule it was split by (Dify's
-- dataset_process_rule_id); existing rows get a fresh random id.
ALTER TABLE documents ADD COLUMN process_rule_id TEXT NOT NULL DEFAULT '';
UPDATE documents SET process_rule_id = gen_random_uuid()::text WHERE process_rule_id = '';
