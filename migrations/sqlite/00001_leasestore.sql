-- leasestore schema for SQLite.
--
-- Times are INTEGER microseconds since the Unix epoch (UTC): exact, sortable
-- and compared without parsing. Tables are STRICT, so a value of the wrong
-- type is refused instead of being stored as whatever it happens to be.
-- Format versions are stored per row and checked by the backend, so no CHECK
-- pins them here: a newer release may write rows this one must refuse.

-- +goose Up
CREATE TABLE leasestore_leases (
    namespace   TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    owner       TEXT    NOT NULL,
    token       INTEGER NOT NULL CHECK (token > 0),
    acquired_at INTEGER NOT NULL,
    renewed_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    version     INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
) STRICT, WITHOUT ROWID;

CREATE INDEX leasestore_leases_owner ON leasestore_leases (namespace, owner, name);

-- One row: the last fencing token issued, for every key. Bumped in the same
-- transaction as the acquire that uses it, so tokens never go backwards. The
-- triggers make that a property of the file, not only of the code: the
-- counter may only grow and its row may not be deleted or replaced.
CREATE TABLE leasestore_fencing (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    last_token INTEGER NOT NULL CHECK (last_token >= 0)
) STRICT;
INSERT INTO leasestore_fencing (id, last_token) VALUES (1, 0);

-- +goose StatementBegin
CREATE TRIGGER leasestore_fencing_no_decrease BEFORE UPDATE ON leasestore_fencing
WHEN NEW.last_token < OLD.last_token OR NEW.id <> OLD.id
BEGIN
    SELECT RAISE(ABORT, 'leasestore_fencing: the fencing counter may not decrease');
END;
-- +goose StatementEnd

-- INSERT OR REPLACE would delete the row without firing the DELETE trigger.
-- +goose StatementBegin
CREATE TRIGGER leasestore_fencing_no_replace BEFORE INSERT ON leasestore_fencing
WHEN EXISTS (SELECT 1 FROM leasestore_fencing)
BEGIN
    SELECT RAISE(ABORT, 'leasestore_fencing: the fencing counter may not be replaced');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER leasestore_fencing_no_delete BEFORE DELETE ON leasestore_fencing
BEGIN
    SELECT RAISE(ABORT, 'leasestore_fencing: the fencing counter may not be deleted');
END;
-- +goose StatementEnd

-- AUTOINCREMENT: ids are never reused, even after the highest row is gone,
-- so an audit cursor never resumes past a record it has not seen.
CREATE TABLE leasestore_audit (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    op          TEXT    NOT NULL,
    namespace   TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    owner       TEXT    NOT NULL,
    token       INTEGER NOT NULL,
    request_id  TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    reason      TEXT    NOT NULL DEFAULT '',
    status      TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    params_hash TEXT    NOT NULL,
    expires_at  INTEGER,
    UNIQUE (namespace, request_id)
) STRICT;

CREATE INDEX leasestore_audit_key ON leasestore_audit (namespace, name, id);
CREATE INDEX leasestore_audit_at ON leasestore_audit (at, id);

-- The audit trail is append-only. SQLite has no TRUNCATE: a DELETE without
-- WHERE fires the DELETE trigger like any other.
-- +goose StatementBegin
CREATE TRIGGER leasestore_audit_no_update BEFORE UPDATE ON leasestore_audit
BEGIN
    SELECT RAISE(ABORT, 'leasestore_audit is append-only: UPDATE refused');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER leasestore_audit_no_delete BEFORE DELETE ON leasestore_audit
BEGIN
    SELECT RAISE(ABORT, 'leasestore_audit is append-only: DELETE refused');
END;
-- +goose StatementEnd

-- INSERT OR REPLACE deletes the row it replaces without firing DELETE
-- triggers (unless recursive_triggers is on), so an insert that would
-- collide with an existing record is refused here, before REPLACE can act.
-- +goose StatementBegin
CREATE TRIGGER leasestore_audit_no_replace BEFORE INSERT ON leasestore_audit
WHEN EXISTS (SELECT 1 FROM leasestore_audit
             WHERE id = NEW.id OR (namespace = NEW.namespace AND request_id = NEW.request_id))
BEGIN
    SELECT RAISE(ABORT, 'leasestore_audit is append-only: replacing a record refused');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE leasestore_audit;
DROP TABLE leasestore_fencing;
DROP TABLE leasestore_leases;
