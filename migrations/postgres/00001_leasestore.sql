-- leasestore schema for PostgreSQL. Every object is created unqualified, so
-- it lands in the first schema of the connection's search_path: give
-- leasestore its own schema by setting search_path (for example in the DSN's
-- options) before migrating.
--
-- Text that is compared or ordered (namespaces, names, owners) uses the "C"
-- collation: byte order, the same order as Go's and SQLite's, independent of
-- the database's locale, and usable by the b-tree indexes for prefixes and
-- keyset pagination.

-- +goose Up
CREATE TABLE leasestore_leases (
    namespace   text        COLLATE "C" NOT NULL,
    name        text        COLLATE "C" NOT NULL,
    owner       text        COLLATE "C" NOT NULL,
    token       bigint      NOT NULL CHECK (token > 0),
    acquired_at timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    version     integer     NOT NULL,
    PRIMARY KEY (namespace, name)
);

-- Listing one owner's leases. The owner comes first so that the planner
-- never prefers this index to the primary key for a look-up by key (with
-- (namespace, ...) first, a generic plan built while the table is small may
-- scan the namespace through it).
CREATE INDEX leasestore_leases_owner ON leasestore_leases (owner, namespace, name);

-- Fencing tokens for every key. A sequence never goes backwards, across
-- releases, revokes, crashes and restarts; gaps are harmless.
CREATE SEQUENCE leasestore_fencing_seq AS bigint;

-- One row per state change. Every state change is one statement in its own
-- transaction and writes exactly one row, whose id is that transaction's id
-- (pg_current_xact_id(), 64 bits, never reused). Changes of one key get
-- their transaction ids one after the other, so a key's records read in id
-- order are in the order they happened (see sqlstore/postgres). Across keys,
-- transactions commit in any order; a reader knows from its snapshot, and
-- from who holds this table's write lock, which records may still gain an
-- uncommitted predecessor, and holds them back, so a follower paging by id
-- never skips a record that commits late (readAuditSQL in sqlstore/postgres).
-- An identity column could not give that: its values are drawn in an order
-- no snapshot reveals.
CREATE TABLE leasestore_audit (
    id          bigint      PRIMARY KEY,
    at          timestamptz NOT NULL,
    op          text        NOT NULL,
    namespace   text        COLLATE "C" NOT NULL,
    name        text        COLLATE "C" NOT NULL,
    owner       text        COLLATE "C" NOT NULL,
    token       bigint      NOT NULL,
    request_id  text        COLLATE "C" NOT NULL,
    actor       text        NOT NULL,
    reason      text        NOT NULL DEFAULT '',
    status      text        NOT NULL,
    version     integer     NOT NULL,
    params_hash text        NOT NULL,
    expires_at  timestamptz,
    CONSTRAINT leasestore_audit_request UNIQUE (namespace, request_id)
);

-- A key's trail. The name comes first for the same reason as above: the
-- idempotency look-up by (namespace, request_id) must use its unique index,
-- not scan a namespace through this one.
CREATE INDEX leasestore_audit_key ON leasestore_audit (name, namespace, id);
CREATE INDEX leasestore_audit_at ON leasestore_audit (at, id);

-- +goose StatementBegin
CREATE FUNCTION leasestore_audit_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'leasestore_audit is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER leasestore_audit_no_update_delete
    BEFORE UPDATE OR DELETE ON leasestore_audit
    FOR EACH ROW EXECUTE FUNCTION leasestore_audit_refuse();

CREATE TRIGGER leasestore_audit_no_truncate
    BEFORE TRUNCATE ON leasestore_audit
    FOR EACH STATEMENT EXECUTE FUNCTION leasestore_audit_refuse();

-- What a state-changing statement that changed nothing needs to answer:
-- the audit row of (namespace, request id) if there is one (a replay, or a
-- request id reused), else the key's lease row, if any; as JSON, NULL
-- members for what is absent. The backend calls it only on that path, from
-- the statement's final SELECT, so that a change that takes effect does not
-- pay for these reads (see sqlstore/postgres/queries.go). STABLE: it reads
-- with the calling statement's snapshot. PL/pgSQL keeps its plans for the
-- session.
-- +goose StatementBegin
CREATE FUNCTION leasestore_outcome(p_namespace text, p_name text, p_request_id text) RETURNS json
STABLE LANGUAGE plpgsql AS $$
DECLARE
    r json;
BEGIN
    SELECT row_to_json(a) INTO r
    FROM (SELECT id, at, op, namespace, name, owner, token, request_id, actor, reason, status, version,
                 params_hash, expires_at
          FROM leasestore_audit
          WHERE namespace = p_namespace AND request_id = p_request_id) AS a;
    IF r IS NOT NULL THEN
        RETURN json_build_object('prior', r);
    END IF;
    SELECT row_to_json(l) INTO r
    FROM (SELECT owner, token, acquired_at, renewed_at, expires_at, version
          FROM leasestore_leases
          WHERE namespace = p_namespace AND name = p_name) AS l;
    RETURN json_build_object('cur', r);
END;
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION leasestore_outcome(text, text, text);
DROP TABLE leasestore_audit;
DROP FUNCTION leasestore_audit_refuse();
DROP SEQUENCE leasestore_fencing_seq;
DROP TABLE leasestore_leases;
