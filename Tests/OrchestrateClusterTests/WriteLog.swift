import Foundation

/// Every write the LAN's machines make to a run's rows (runs, steps, events, checkpoints,
/// items), logged by database triggers into `machine_writes`: when (the database's clock),
/// which machine (by its connection's address), which run, and whether that machine held a
/// valid lease on the run at the time (judged at the transaction's start, as the store's fence
/// is). Fencing means no row with `held = false`; the log is the database's own account, not the
/// journal orchestrate writes, so a broken fence cannot hide from it.
enum WriteLog {
    static func install(in cluster: Cluster) throws {
        let machines = cluster.lan.machines.enumerated().map { "('\($1.address)', 'n\($0 + 1)')" }.joined(separator: ", ")
        let tables = ["runs", "steps", "events", "checkpoints", "items"]
        _ = try cluster.postgres.sql("""
            CREATE TABLE machine_addresses (address inet PRIMARY KEY, node text NOT NULL);
            INSERT INTO machine_addresses VALUES \(machines);
            CREATE TABLE machine_writes (at double precision, node text, tbl text, op text, run_id text, held boolean);
            CREATE FUNCTION log_machine_write() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE
                writer text;
                run text;
                held boolean;
                started double precision := extract(epoch FROM now());
            BEGIN
                SELECT node INTO writer FROM machine_addresses WHERE address = inet_client_addr();
                IF writer IS NULL THEN RETURN NULL; END IF;
                IF TG_TABLE_NAME = 'runs' THEN
                    -- A claim makes the writer the owner (NEW); a release ends its ownership (OLD).
                    IF TG_OP = 'INSERT' THEN
                        run := NEW.id;
                        held := NEW.owner_node = writer AND NEW.lease_until > started;
                    ELSIF TG_OP = 'DELETE' THEN
                        run := OLD.id;
                        held := OLD.owner_node = writer AND OLD.lease_until > started;
                    ELSE
                        run := NEW.id;
                        held := (OLD.owner_node = writer AND OLD.lease_until > started)
                             OR (NEW.owner_node = writer AND NEW.lease_until > started);
                    END IF;
                ELSE
                    IF TG_OP = 'DELETE' THEN run := OLD.run_id; ELSE run := NEW.run_id; END IF;
                    IF run IS NULL THEN RETURN NULL; END IF;
                    held := EXISTS (SELECT 1 FROM runs WHERE id = run AND owner_node = writer AND lease_until > started);
                END IF;
                INSERT INTO machine_writes VALUES (extract(epoch FROM clock_timestamp()), writer, TG_TABLE_NAME, TG_OP, run,
                                                   coalesce(held, false));
                RETURN NULL;
            END $$;
            \(tables.map { "CREATE TRIGGER log_machine_write AFTER INSERT OR UPDATE OR DELETE ON \($0) FOR EACH ROW EXECUTE FUNCTION log_machine_write();" }.joined(separator: "\n"))
            """, database: cluster.database)
    }

    /// The writes made to runs the writing machine held no valid lease on (node, table,
    /// operation, run, time).
    static func unheld(in cluster: Cluster) throws -> [[String]] {
        try cluster.rows("SELECT node, tbl, op, run_id, at FROM machine_writes WHERE NOT held ORDER BY at")
    }
}
