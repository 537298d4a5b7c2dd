-- leasestore schema for SQLite. Times are INTEGER microseconds since the Unix
-- epoch (UTC): exact, sortable and compared without parsing.

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
) WITHOUT ROWID;

CREATE INDEX leasestore_leases_owner ON leasestore_leases (namespace, owner, name);

-- One row: the last fencing token issued, for every key. Bumped in the same
-- transaction as the acquire that uses it, so tokens never go backwards.
CREATE TABLE leasestore_fencing (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    last_token INTEGER NOT NULL
);
INSERT INTO leasestore_fencing (id, last_token) VALUES (1, 0);

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
);

CREATE INDEX leasestore_audit_key ON leasestore_audit (namespace, name, id);
CREATE INDEX leasestore_audit_at ON leasestore_audit (at, id);

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

-- +goose Down
DROP TRIGGER leasestore_audit_no_delete;
DROP TRIGGER leasestore_audit_no_update;
DROP TABLE leasestore_audit;
DROP TABLE leasestore_fencing;
DROP TABLE leasestore_leases;
