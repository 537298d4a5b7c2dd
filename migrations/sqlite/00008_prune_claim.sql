-- leasestore schema version 8 for SQLite: a prune claims its request id.
--
-- A prune removes records in batches, a write transaction each, and writes
-- its own record (namespace '', its request id) with the last. Two prunes
-- with one request id at once (a client retrying a prune that timed out
-- while the first still ran) both found the id unused, both removed
-- records, and the one that came second to its last batch answered
-- invalid although it had removed records that no record counted. Now
-- each batch of a prune, in its transaction, claims the request id in
-- leasestore_audit_prune_claim (the row of the id, naming the prune's
-- run), before it removes anything: a batch of another run, or of a prune
-- whose id is in the trail, finds it taken and removes nothing; the last
-- batch deletes the claim with the record it writes, and a prune that
-- stops early (its context ended, an error) deletes it in a transaction of
-- its own, so that the prune can be sent again with its id. A claim left
-- by a prune that could not delete it (its process died) keeps that id
-- refused as used; a prune with another id goes on. The row says who
-- pruned, before which time and when the claim was taken (microseconds);
-- deleting it frees the id.
--
-- The claim is not an audit record: the trail is append-only, and a row
-- there could not be deleted without raising the mark of what prunes
-- removed (migration 7) past records followers have not read. A release
-- before this version serves this schema unchanged (leasestore_compat
-- stays as it is); its prunes neither take nor honour claims, so during a
-- rolling deploy two prunes with one request id, one of each release, can
-- still both remove records.

-- +goose Up
CREATE TABLE leasestore_audit_prune_claim (
    request_id TEXT    PRIMARY KEY,
    run        TEXT    NOT NULL,
    actor      TEXT    NOT NULL,
    before     INTEGER NOT NULL,
    at         INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Down keeps what a claim says: a claim left by a prune that died keeps
-- its id refused as used, and dropping it with the table freed the id, so
-- that after a migrate down past 8 and up the prune sent again with it
-- ran as if new. Each claim left becomes a record of the trail (appended,
-- as the trail allows: namespace '', the claim's request id, actor and
-- time, op prune, status pruned, the reason saying so), so that the id
-- stays used, below 8 and after up again, as a prune's record keeps it.
-- Down is never refused for claims: a rollback needs no operator action
-- (this was added after the migration shipped; it changes only what its
-- Down does).
-- +goose Down
INSERT INTO leasestore_audit (at, op, namespace, name, owner, token, request_id, actor, reason, status, version,
                              params_hash)
SELECT c.at, 'prune', '', '', '', 0, c.request_id, c.actor,
       'a prune with this request id stopped before its last batch and left its claim (before '
           || c.before || ' microseconds since 1970); migrate down past version 8 kept the claim as this record',
       'pruned', 1, ''
FROM leasestore_audit_prune_claim AS c
WHERE NOT EXISTS (SELECT 1 FROM leasestore_audit a WHERE a.namespace = '' AND a.request_id = c.request_id)
ORDER BY c.at, c.request_id;

DROP TABLE leasestore_audit_prune_claim;
