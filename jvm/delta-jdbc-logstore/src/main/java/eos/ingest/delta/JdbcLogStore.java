package eos.ingest.delta;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.util.Optional;
import java.util.Properties;
import java.util.regex.Pattern;
import io.delta.storage.internal.FileNameUtils;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Delta's external log store with its commit entries in a table of a SQL database (the eos-ingest
 * control DB), for object stores whose PUT is not an atomic put-if-absent.
 *
 * <p>BaseExternalLogStore (Delta's, copied beside this file) commits version N of a table by (1) writing the actions to a temporary
 * file T(N), (2) inserting the entry E(N, T(N), complete=false) with mutual exclusion, (3) copying
 * T(N) to N.json and (4) marking E complete. Step 2 IS the commit: the first insert of (table, N)
 * wins, any other writer gets FileAlreadyExistsException (Delta then re-reads the log, checks for
 * conflicts and retries at N+1), and every later reader or writer that sees an incomplete E copies
 * T(N) to N.json itself. So a writer that stops after step 2, however long (a zombie), cannot lose
 * a commit nor have two: there is no lease to expire. Here step 2 is
 * {@code INSERT ... ON CONFLICT DO NOTHING}: atomic in PostgreSQL, one row or none.
 *
 * <p>Settings (Hadoop configuration, or the same key with a {@code spark.} prefix):
 * {@code eos.delta.jdbc.url}, {@code eos.delta.jdbc.user}, {@code eos.delta.jdbc.password},
 * {@code eos.delta.jdbc.table} (default {@code eos_delta_commits}, created when missing),
 * {@code eos.delta.jdbc.keep_versions} (default {@value #DEFAULT_KEEP_VERSIONS}; 0 keeps every entry).
 * Enable with {@code spark.delta.logStore.s3a.impl=eos.ingest.delta.JdbcLogStore}.
 *
 * <p>Bounded growth: after marking the entry of version N complete, the writer deletes the
 * complete entries below version N - keep_versions (the files they stand for are in the log). Delta's
 * own answer is a one-day TTL, and its reasoning is that a writer whose entry was deleted could
 * then "win" that version again with a put that is not atomic. Here that cannot happen, however
 * late the writer: the commit insert of a version is refused (FileAlreadyExistsException, as for
 * a taken version) while the table has an entry of a higher version, and entries are deleted only
 * from the bottom, so a higher one always remains.
 */
public class JdbcLogStore extends BaseExternalLogStore {
  public static final String PREFIX = "eos.delta.jdbc.";
  public static final int DEFAULT_KEEP_VERSIONS = 100;
  /**
   * Test-only fault hook, inert unless set: the path of a file. The first commit of a Delta
   * version in this JVM that has inserted its entry (complete=false) writes the version's file
   * name into that file and then waits, before copying its temporary file to N.json, until the
   * process is killed. The tests kill -9 the writer in exactly that window.
   */
  public static final String PAUSE_AFTER_ENTRY_ENV = "EOS_FAULT_DELTA_PAUSE_AFTER_ENTRY";
  private static final Logger LOG = LoggerFactory.getLogger(JdbcLogStore.class);
  private static final Pattern TABLE_NAME = Pattern.compile("[a-z_][a-z0-9_]{0,62}");

  private final String url;
  private final Properties credentials = new Properties();
  private final String table;
  private final int keepVersions;
  private Connection connection; // one per log store, reopened after a failure; guarded by this
  private boolean tableReady;

  public JdbcLogStore(Configuration hadoopConf) {
    super(hadoopConf);
    url = param(hadoopConf, "url", null);
    if (url == null || !url.startsWith("jdbc:")) {
      throw new IllegalArgumentException(
          PREFIX + "url is not set (or not a jdbc: URL): the JDBC URL of the control DB that"
              + " coordinates Delta commits; eos-ingest sets it from the pipeline's control_db_url");
    }
    String user = param(hadoopConf, "user", null);
    String password = param(hadoopConf, "password", null);
    if (user != null) credentials.setProperty("user", user);
    if (password != null) credentials.setProperty("password", password);
    table = param(hadoopConf, "table", "eos_delta_commits");
    if (!TABLE_NAME.matcher(table).matches()) {
      throw new IllegalArgumentException(PREFIX + "table must match " + TABLE_NAME + ": " + table);
    }
    String keep = param(hadoopConf, "keep_versions", String.valueOf(DEFAULT_KEEP_VERSIONS));
    try {
      keepVersions = Integer.parseInt(keep.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(
          PREFIX + "keep_versions must be a whole number of versions (0 keeps all): " + keep);
    }
    if (keepVersions < 0) {
      throw new IllegalArgumentException(PREFIX + "keep_versions must be 0 or more: " + keep);
    }
  }

  private static String param(Configuration conf, String name, String fallback) {
    String value = conf.get(PREFIX + name);
    if (value == null) value = conf.get("spark." + PREFIX + name);
    return value == null || value.isEmpty() ? fallback : value;
  }

  @Override
  protected synchronized void putExternalEntry(ExternalCommitEntry entry, boolean overwrite)
      throws IOException {
    // overwrite=false: the commit itself, put-if-absent. overwrite=true: only ever marks the entry
    // that won as complete (by its writer, or by a reader repairing it); the temp path must match,
    // so no call can replace a winning entry by another commit's.
    String values = "(table_path, file_name, temp_path, complete, expire_time)";
    String conflict = " ON CONFLICT (table_path, file_name) DO ";
    int rows;
    if (overwrite) {
      rows =
          update(
              "INSERT INTO " + table + " " + values + " VALUES (?, ?, ?, ?, ?)" + conflict
                  + "UPDATE SET complete = EXCLUDED.complete, expire_time = EXCLUDED.expire_time"
                  + " WHERE " + table + ".temp_path = EXCLUDED.temp_path",
              entry,
              false);
    } else {
      // A version is also taken when a higher one has an entry (the log is a sequence): this keeps
      // a late writer from reusing a version whose own entry the cleanup deleted. N.crc sorts
      // below N.json, so only later versions count.
      rows =
          update(
              "INSERT INTO " + table + " " + values + " SELECT ?, ?, ?, ?, ?"
                  + (isDeltaFile(entry) ? " WHERE NOT EXISTS (SELECT 1 FROM " + table
                      + " WHERE table_path = ? AND file_name > ?)" : "")
                  + conflict + "NOTHING",
              entry,
              isDeltaFile(entry));
    }
    if (rows == 0 && !overwrite) {
      throw new FileAlreadyExistsException(entry.absoluteFilePath().toString());
    }
    if (rows == 0) {
      throw new IOException(
          "commit entry " + entry.absoluteFilePath() + " belongs to another commit than " + entry.tempPath);
    }
  }

  private static boolean isDeltaFile(ExternalCommitEntry entry) {
    return FileNameUtils.isDeltaFile(new Path(entry.fileName));
  }

  @Override
  protected void writeCopyTempFile(FileSystem fs, Path src, Path dst) throws IOException {
    pauseIfAsked(dst);
    super.writeCopyTempFile(fs, src, dst);
  }

  @Override
  protected void writePutCompleteDbEntry(ExternalCommitEntry entry) throws IOException {
    super.writePutCompleteDbEntry(entry);
    deleteOldEntries(entry);
  }

  /** Deletes the table's complete entries below version N - keep_versions (N: this commit's). A
   * failure is logged, never the commit's: the entries are only kept a little longer. */
  private synchronized void deleteOldEntries(ExternalCommitEntry entry) {
    if (keepVersions == 0 || !isDeltaFile(entry)) return;
    long below = FileNameUtils.deltaVersion(new Path(entry.fileName)) - keepVersions;
    if (below <= 0) return;
    String belowName = String.format("%020d", below); // every file name of a lower version sorts under it
    try {
      int deleted =
          withConnection(
              conn -> {
                try (PreparedStatement st =
                    conn.prepareStatement(
                        "DELETE FROM " + table
                            + " WHERE table_path = ? AND file_name < ? AND complete")) {
                  st.setString(1, entry.tablePath.toString());
                  st.setString(2, belowName);
                  return st.executeUpdate();
                }
              });
      if (deleted > 0) LOG.debug("deleted {} commit entries of {} below version {}", deleted, entry.tablePath, below);
    } catch (IOException e) {
      LOG.warn("could not delete old commit entries of {}: {}", entry.tablePath, e.getMessage());
    }
  }

  private static final Object PAUSE_ONCE = new Object();
  private static boolean paused;

  private static void pauseIfAsked(Path dst) throws IOException {
    String marker = System.getenv(PAUSE_AFTER_ENTRY_ENV);
    if (marker == null || marker.isEmpty() || !FileNameUtils.isDeltaFile(dst)) return;
    synchronized (PAUSE_ONCE) {
      if (paused) return;
      paused = true;
    }
    java.nio.file.Path target = java.nio.file.Path.of(marker);
    java.nio.file.Path aside = target.resolveSibling(target.getFileName() + ".tmp");
    Files.writeString(aside, dst.toString(), StandardCharsets.UTF_8);
    Files.move(aside, target, StandardCopyOption.ATOMIC_MOVE); // never seen half written
    LOG.warn("{} is set: paused before copying to {} until killed", PAUSE_AFTER_ENTRY_ENV, dst);
    try {
      while (true) Thread.sleep(1000);
    } catch (InterruptedException e) {
      throw new InterruptedIOException("paused commit interrupted");
    }
  }

  @Override
  protected synchronized Optional<ExternalCommitEntry> getExternalEntry(String tablePath, String fileName)
      throws IOException {
    return query(
        "SELECT table_path, file_name, temp_path, complete, expire_time FROM " + table
            + " WHERE table_path = ? AND file_name = ?",
        tablePath,
        fileName);
  }

  @Override
  protected synchronized Optional<ExternalCommitEntry> getLatestExternalEntry(Path tablePath)
      throws IOException {
    // Delta file names are zero-padded to 20 digits: text order is version order.
    return query(
        "SELECT table_path, file_name, temp_path, complete, expire_time FROM " + table
            + " WHERE table_path = ? ORDER BY file_name DESC LIMIT 1",
        tablePath.toString(),
        null);
  }

  /** Runs `sql` with the entry's five values, then (with `floor`) its table path and file name. */
  private int update(String sql, ExternalCommitEntry entry, boolean floor) throws IOException {
    return withConnection(
        conn -> {
          try (PreparedStatement st = conn.prepareStatement(sql)) {
            st.setString(1, entry.tablePath.toString());
            st.setString(2, entry.fileName);
            st.setString(3, entry.tempPath);
            st.setBoolean(4, entry.complete);
            if (entry.expireTime == null) st.setNull(5, Types.BIGINT);
            else st.setLong(5, entry.expireTime);
            if (floor) {
              st.setString(6, entry.tablePath.toString());
              st.setString(7, entry.fileName);
            }
            return st.executeUpdate();
          }
        });
  }

  private Optional<ExternalCommitEntry> query(String sql, String tablePath, String fileName)
      throws IOException {
    return withConnection(
        conn -> {
          try (PreparedStatement st = conn.prepareStatement(sql)) {
            st.setString(1, tablePath);
            if (fileName != null) st.setString(2, fileName);
            try (ResultSet rs = st.executeQuery()) {
              if (!rs.next()) return Optional.empty();
              long expire = rs.getLong(5);
              Long expireTime = rs.wasNull() ? null : expire;
              return Optional.of(
                  new ExternalCommitEntry(
                      new Path(rs.getString(1)), rs.getString(2), rs.getString(3), rs.getBoolean(4),
                      expireTime));
            }
          }
        });
  }

  private interface Work<T> {
    T run(Connection conn) throws SQLException;
  }

  /** Runs `work` in autocommit (each statement is its own transaction); one retry on a new
   * connection, so a restarted database costs a reconnect, not a failed commit. A statement that
   * fails twice is an IOException: Delta then fails the commit, nothing is half done. */
  private <T> T withConnection(Work<T> work) throws IOException {
    SQLException last = null;
    for (int attempt = 0; attempt < 2; attempt++) {
      try {
        if (connection == null || connection.isClosed()) {
          connection = DriverManager.getConnection(url, credentials);
          connection.setAutoCommit(true);
        }
        ensureTable(connection);
        return work.run(connection);
      } catch (SQLException e) {
        last = e;
        closeQuietly();
      }
    }
    // The URL only: the password is a separate property and never part of a message.
    throw new IOException("Delta commit coordinator at " + url + " failed: " + last.getMessage(), last);
  }

  private void ensureTable(Connection conn) throws SQLException {
    if (tableReady) return;
    String ddl =
        "CREATE TABLE IF NOT EXISTS " + table + " ("
            + "table_path TEXT NOT NULL, file_name TEXT NOT NULL, temp_path TEXT NOT NULL,"
            + " complete BOOLEAN NOT NULL, expire_time BIGINT,"
            + " created_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP,"
            + " PRIMARY KEY (table_path, file_name))";
    try (Statement st = conn.createStatement()) {
      st.execute(ddl);
    } catch (SQLException e) {
      // Two first writers at once: PostgreSQL's IF NOT EXISTS can still collide in its catalog
      // (unique violation, SQLSTATE 23505); the other one created it.
      if (!"23505".equals(e.getSQLState())) throw e;
    }
    tableReady = true;
  }

  private void closeQuietly() {
    try {
      if (connection != null) connection.close();
    } catch (SQLException ignored) {
      // the connection is being replaced
    }
    connection = null;
  }
}
