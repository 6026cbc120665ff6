-- Each document names the processing rule it was split by, as Dify's
-- dataset_process_rule_id does. The rule itself stays inline in
-- documents.process_rule; the id changes whenever that rule changes.
ALTER TABLE documents ADD COLUMN process_rule_id TEXT NOT NULL DEFAULT '';

-- Documents made before this migration get a fresh random id (UUID v4 form).
UPDATE documents SET process_rule_id =
    lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4' ||
    substr(lower(hex(randomblob(2))), 2) || '-' ||
    substr('89ab', 1 + (abs(random()) % 4), 1) || substr(lower(hex(randomblob(2))), 2) || '-' ||
    lower(hex(randomblob(6)))
WHERE process_rule_id = '';
