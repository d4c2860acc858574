package eos.ingest.delta;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.SocketTimeoutException;
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
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.Properties;
import java.util.regex.Pattern;
import io.delta.storage.CloseableIterator;
import io.delta.storage.internal.FileNameUtils;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
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
 * T(N) to N.json itself (a listing of the log for the latest entry, a read of a missing N.json for
 * its own). So a writer that stops after step 2, however long (a zombie), cannot lose
 * a commit nor have two: there is no lease to expire. Here step 2 is
 * {@code INSERT ... ON CONFLICT DO NOTHING}: atomic in PostgreSQL, one row or none.
 *
 * <p>A writer whose copy (step 3) fails does not fail the commit: it completes its entry at once
 * the way a reader does (copy only if N.json is absent, then mark complete; up to 4 tries), because
 * Delta asks the FileSystem for N.json's status as soon as write() returns. Only if that fails too
 * does write() return with the entry unfinished; Delta's commit call then fails on the missing
 * N.json (FileNotFoundException) although the commit is decided, and the next listing, read or
 * write of the log completes it. Repairs are idempotent: every repairer copies the same T(N) with
 * overwrite=false, and only the entry naming T(N) is marked complete.
 *
 * <p>Settings (Hadoop configuration, or the same key with a {@code spark.} prefix):
 * {@code eos.delta.jdbc.url}, {@code eos.delta.jdbc.user}, {@code eos.delta.jdbc.password},
 * {@code eos.delta.jdbc.table} (default {@code eos_delta_commits}, created when missing),
 * {@code eos.delta.jdbc.keep_versions} (default {@value #DEFAULT_KEEP_VERSIONS}; 0 keeps every entry),
 * {@code eos.delta.jdbc.connect_timeout}, {@code eos.delta.jdbc.login_timeout} and
 * {@code eos.delta.jdbc.socket_timeout} (seconds; defaults {@value #DEFAULT_CONNECT_TIMEOUT_S},
 * {@value #DEFAULT_LOGIN_TIMEOUT_S}, {@value #DEFAULT_SOCKET_TIMEOUT_S}; 0 waits forever): the
 * PostgreSQL JDBC driver's connectTimeout, loginTimeout and socketTimeout, so a database that stops
 * answering fails the commit (an IOException naming the timeout) instead of hanging it while
 * Delta's lock on the path (and this store's monitor) is held.
 * Enable with {@code spark.delta.logStore.s3a.impl=eos.ingest.delta.JdbcLogStore}.
 *
 * <p>Bounded growth: after marking the entry of version N complete, the writer deletes the
 * complete entries below version N - keep_versions (the files they stand for are in the log), then
 * their temporary files in {@code _delta_log/.tmp/}. Delta's
 * own answer is a one-day TTL, and its reasoning is that a writer whose entry was deleted could
 * then "win" that version again with a put that is not atomic. Here that cannot happen, however
 * late the writer: the commit insert of a version is refused (FileAlreadyExistsException, as for
 * a taken version) while the table has an entry of a higher version, and entries are deleted only
 * from the bottom, so a higher one always remains.
 */
public class JdbcLogStore extends BaseExternalLogStore {
  public static final String PREFIX = "eos.delta.jdbc.";
  public static final int DEFAULT_KEEP_VERSIONS = 100;
  public static final int DEFAULT_CONNECT_TIMEOUT_S = 10;
  public static final int DEFAULT_LOGIN_TIMEOUT_S = 10;
  public static final int DEFAULT_SOCKET_TIMEOUT_S = 30;
  /**
   * Test-only fault hook, inert unless set: the path of a file. The first commit of a Delta
   * version in this JVM that has inserted its entry (complete=false) writes the version's file
   * name into that file and then waits, before copying its temporary file to N.json, until the
   * process is killed. The tests kill -9 the writer in exactly that window.
   */
  public static final String PAUSE_AFTER_ENTRY_ENV = "EOS_FAULT_DELTA_PAUSE_AFTER_ENTRY";
  /**
   * Test-only fault hook, inert unless set: the path of a file. The first copy of a temporary
   * file to a Delta version's N.json in this JVM (the commit's step 3, after its entry is
   * inserted) fails once with an IOException, after writing N.json's path into that file; when
   * {@value #FAIL_COPY_TABLE_ENV} is set, only a copy into that table's log counts. The commit
   * stands (the entry is the commit): the writer then completes its entry as a reader would
   * (fixDeltaLog's copy, which this hook does not touch), before write() returns.
   */
  public static final String FAIL_COPY_ONCE_ENV = "EOS_FAULT_DELTA_FAIL_COPY_ONCE";
  public static final String FAIL_COPY_TABLE_ENV = "EOS_FAULT_DELTA_FAIL_COPY_TABLE";
  private static final Logger LOG = LoggerFactory.getLogger(JdbcLogStore.class);
  private static final Pattern TABLE_NAME = Pattern.compile("[a-z_][a-z0-9_]{0,62}");

  private final String url;
  private final Properties credentials = new Properties();
  private final String table;
  private final int keepVersions;
  private final int socketTimeoutS;
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
    // pgjdbc's own property names; a URL that sets one itself wins (pgjdbc reads the URL last).
    credentials.setProperty(
        "connectTimeout", String.valueOf(seconds(hadoopConf, "connect_timeout", DEFAULT_CONNECT_TIMEOUT_S)));
    credentials.setProperty(
        "loginTimeout", String.valueOf(seconds(hadoopConf, "login_timeout", DEFAULT_LOGIN_TIMEOUT_S)));
    socketTimeoutS = seconds(hadoopConf, "socket_timeout", DEFAULT_SOCKET_TIMEOUT_S);
    credentials.setProperty("socketTimeout", String.valueOf(socketTimeoutS));
    credentials.setProperty("ApplicationName", "eos-delta-commit-coordinator");
  }

  private static int seconds(Configuration conf, String name, int fallback) {
    String value = param(conf, name, String.valueOf(fallback));
    int parsed;
    try {
      parsed = Integer.parseInt(value.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(
          PREFIX + name + " must be a whole number of seconds (0: no limit): " + value);
    }
    if (parsed < 0) throw new IllegalArgumentException(PREFIX + name + " must be 0 or more seconds: " + value);
    return parsed;
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
      // withConnection retries a statement once on a new connection (after a timeout, say): the
      // first attempt may have inserted the row and lost only its answer. The row naming this
      // commit's own temporary file is this commit's: it won.
      Optional<ExternalCommitEntry> found = getExternalEntry(entry.tablePath.toString(), entry.fileName);
      if (found.isPresent() && found.get().tempPath.equals(entry.tempPath)) return;
      // Certainly refused: no row names this commit's temporary file and nobody but this writer
      // knows it, so it goes now (not when the insert failed: a row may then name it).
      deleteQuietly(entry.absoluteTempPath());
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
    failCopyIfAsked(dst);
    super.writeCopyTempFile(fs, src, dst);
  }

  private static boolean copyFailed;

  private static void failCopyIfAsked(Path dst) throws IOException {
    String marker = System.getenv(FAIL_COPY_ONCE_ENV);
    if (marker == null || marker.isEmpty() || !FileNameUtils.isDeltaFile(dst)) return;
    String only = System.getenv(FAIL_COPY_TABLE_ENV);
    if (only != null && !only.isEmpty()
        && !dst.toString().startsWith(only.replaceAll("/+$", "") + "/_delta_log/")) return;
    synchronized (PAUSE_ONCE) {
      if (copyFailed) return;
      copyFailed = true;
    }
    java.nio.file.Path target = java.nio.file.Path.of(marker);
    java.nio.file.Path aside = target.resolveSibling(target.getFileName() + ".tmp");
    Files.writeString(aside, dst.toString(), StandardCharsets.UTF_8);
    Files.move(aside, target, StandardCopyOption.ATOMIC_MOVE);
    throw new IOException(FAIL_COPY_ONCE_ENV + " is set: the copy to " + dst + " fails once");
  }

  @Override
  protected void writePutCompleteDbEntry(ExternalCommitEntry entry) throws IOException {
    super.writePutCompleteDbEntry(entry);
    deleteOldEntries(entry);
  }

  /** Deletes the table's complete entries below version N - keep_versions (N: this commit's), then
   * the temporary files they name. A failure is logged, never the commit's: the entries are only
   * kept a little longer (the next commit deletes them), or a temporary file is left behind.
   *
   * <p>Why deleting the temporary file of such an entry is safe: the entry is complete, so its
   * N.json was written; a temporary file is read only to complete an incomplete entry (a reader's
   * or the next writer's repair), and only the latest entry and the one just below a writer's
   * version are ever repaired, never one keep_versions below the latest. A repair that read the
   * entry while it was incomplete and then stalled across keep_versions commits finds N.json
   * there (it checks before copying, and again after a failed copy), so it needs no temporary
   * file. The row goes first (DELETE ... RETURNING): two cleaners never share a file, and a file
   * whose row is gone is named nowhere, so nobody can read it. */
  private synchronized void deleteOldEntries(ExternalCommitEntry entry) {
    if (keepVersions == 0 || !isDeltaFile(entry)) return;
    long below = FileNameUtils.deltaVersion(new Path(entry.fileName)) - keepVersions;
    if (below <= 0) return;
    String belowName = String.format("%020d", below); // every file name of a lower version sorts under it
    List<String> temps;
    try {
      temps =
          withConnection(
              conn -> {
                try (PreparedStatement st =
                    conn.prepareStatement(
                        "DELETE FROM " + table
                            + " WHERE table_path = ? AND file_name < ? AND complete RETURNING temp_path")) {
                  st.setString(1, entry.tablePath.toString());
                  st.setString(2, belowName);
                  List<String> paths = new ArrayList<>();
                  try (ResultSet rs = st.executeQuery()) {
                    while (rs.next()) paths.add(rs.getString(1));
                  }
                  return paths;
                }
              });
    } catch (IOException e) {
      LOG.warn("could not delete old commit entries of {}: {}", entry.tablePath, e.getMessage());
      return;
    }
    for (String temp : temps) {
      deleteQuietly(new ExternalCommitEntry(entry.tablePath, entry.fileName, temp, true, null).absoluteTempPath());
    }
    if (!temps.isEmpty()) {
      LOG.debug("deleted {} commit entries of {} below version {}", temps.size(), entry.tablePath, below);
    }
  }

  private void deleteQuietly(Path file) {
    try {
      file.getFileSystem(initHadoopConf()).delete(file, false);
    } catch (IOException e) {
      LOG.warn("could not delete the temporary file {}: {}", file, e.getMessage());
    }
  }

  /**
   * Version 0 of a table whose path has entries but no log (the table's objects were deleted and
   * it is being created again, e.g. after a key format change): the old log's entries would refuse
   * the new version 0 (BaseExternalLogStore's "old entries still exist", or the insert's floor),
   * so they are forgotten first, when every one of them is provably of a log that is gone.
   */
  @Override
  public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
      throws IOException {
    if (!overwrite && FileNameUtils.isDeltaFile(path) && FileNameUtils.deltaVersion(path) == 0) {
      FileSystem fs = path.getFileSystem(hadoopConf);
      forgetDeletedLog(fs, getTablePath(stripUserInfo(fs.makeQualified(path))));
    }
    super.write(path, actions, overwrite, hadoopConf);
  }

  /**
   * Deletes the table's entries when its log is gone. Correct beside concurrent writers: the log
   * (any file in _delta_log/ but temporary ones) and the temporary files are listed after the
   * entries are read, and S3 lists consistently, so
   * <ul>
   *   <li>an entry of a live table has a log file or its temporary file listed: a writer writes
   *       its temporary file before it inserts its entry, and a temporary file is deleted only
   *       with an entry keep_versions below a later one, whose own N.json is then listed;
   *   <li>so an entry whose table has no log file and whose temporary file is not listed is of a
   *       deleted log: nobody can complete it (no temporary file), and no new writer's insert of
   *       its version can have succeeded while it exists;
   *   <li>each is deleted by its key and temporary path, so a new writer's entry (another
   *       temporary path) is never deleted, even one that replaced a stale row meanwhile.
   * </ul>
   * When the log is gone but some entry is not provably stale (its temporary file remains), the
   * write is refused with one line naming the path and the way out; except a lone unfinished
   * entry for version 0 with its temporary file: a concurrent creator's, which Delta's conflict
   * path handles (this writer's insert is refused as a taken version).
   */
  private void forgetDeletedLog(FileSystem fs, Path tablePath) throws IOException {
    List<ExternalCommitEntry> entries = queryAll(tablePath.toString());
    if (entries.isEmpty()) return;
    Path logPath = new Path(tablePath, "_delta_log");
    for (FileStatus status : listOrEmpty(fs, logPath)) {
      if (status.isFile() && !status.getPath().getName().startsWith(".")) return; // the log exists
    }
    Set<String> temps = new HashSet<>();
    for (FileStatus status : listOrEmpty(fs, new Path(logPath, ".tmp"))) {
      temps.add(".tmp/" + status.getPath().getName());
    }
    List<ExternalCommitEntry> live = new ArrayList<>();
    for (ExternalCommitEntry e : entries) {
      if (temps.contains(e.tempPath)) live.add(e);
    }
    if (live.isEmpty()) {
      int deleted = 0;
      for (ExternalCommitEntry e : entries) {
        deleted +=
            withConnection(
                conn -> {
                  try (PreparedStatement st =
                      conn.prepareStatement(
                          "DELETE FROM " + table + " WHERE table_path = ? AND file_name = ? AND temp_path = ?")) {
                    st.setString(1, e.tablePath.toString());
                    st.setString(2, e.fileName);
                    st.setString(3, e.tempPath);
                    return st.executeUpdate();
                  }
                });
      }
      LOG.warn("{} has no Delta log: forgot {} commit entries of the table deleted there", tablePath, deleted);
      return;
    }
    ExternalCommitEntry first = live.get(0);
    if (entries.size() == 1 && !first.complete && FileNameUtils.deltaVersion(new Path(first.fileName)) == 0) {
      return;
    }
    String where = "table_path = '" + tablePath.toString().replace("'", "''") + "'";
    throw new java.nio.file.FileSystemException(
        tablePath + ": the Delta commit coordinator holds " + entries.size() + " entries of a table"
            + " deleted at this path, and some of their temporary files remain in _delta_log/.tmp/;"
            + " with no writer of this path running, delete every object under " + tablePath
            + "/ and write again, or run in the control DB: DELETE FROM " + table + " WHERE " + where);
  }

  private static FileStatus[] listOrEmpty(FileSystem fs, Path dir) throws IOException {
    try {
      return fs.listStatus(dir);
    } catch (FileNotFoundException e) {
      return new FileStatus[0];
    }
  }

  private synchronized List<ExternalCommitEntry> queryAll(String tablePath) throws IOException {
    return withConnection(
        conn -> {
          try (PreparedStatement st =
              conn.prepareStatement(
                  "SELECT table_path, file_name, temp_path, complete, expire_time FROM " + table
                      + " WHERE table_path = ? ORDER BY file_name")) {
            st.setString(1, tablePath);
            List<ExternalCommitEntry> found = new ArrayList<>();
            try (ResultSet rs = st.executeQuery()) {
              while (rs.next()) found.add(entryOf(rs));
            }
            return found;
          }
        });
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

  /**
   * Reads a log file. A commit file (N.json) that is missing while its entry is stored and
   * unfinished (its writer's copy failed, or the writer died after its insert) is completed first,
   * as listFrom completes the latest entry: a reader never sees a decided commit as absent. The
   * entry is looked up only when the file is missing, so a normal read costs no query.
   */
  @Override
  public CloseableIterator<String> read(Path path, Configuration hadoopConf) throws IOException {
    try {
      return super.read(path, hadoopConf);
    } catch (FileNotFoundException missing) {
      if (!FileNameUtils.isDeltaFile(path)) throw missing;
      FileSystem fs = path.getFileSystem(hadoopConf);
      Path resolved = stripUserInfo(fs.makeQualified(path));
      if (resolved.getParent() == null || !"_delta_log".equals(resolved.getParent().getName())) throw missing;
      Optional<ExternalCommitEntry> entry =
          getExternalEntry(getTablePath(resolved).toString(), resolved.getName());
      if (entry.isEmpty() || entry.get().complete) throw missing;
      fixDeltaLog(fs, entry.get());
      return super.read(path, hadoopConf);
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
    Optional<ExternalCommitEntry> latest =
        query(
            "SELECT table_path, file_name, temp_path, complete, expire_time FROM " + table
                + " WHERE table_path = ? ORDER BY file_name DESC LIMIT 1",
            tablePath.toString(),
            null);
    // Only a reader's listing asks for the latest entry, to complete it. An unfinished entry
    // whose temporary file and N.json are both gone cannot be completed by anyone (a writer
    // writes its temporary file before its entry; only the cleanup of complete entries deletes
    // one): it is of a deleted table's log, and the listing goes on without it (a writer of the
    // next version still stops at it; version 0 of a new table forgets it).
    if (latest.isPresent() && !latest.get().complete) {
      ExternalCommitEntry e = latest.get();
      FileSystem fs = tablePath.getFileSystem(initHadoopConf());
      if (!fs.exists(e.absoluteTempPath()) && !fs.exists(e.absoluteFilePath())) {
        LOG.warn("{}: unfinished commit entry {} names a temporary file that is gone: not repaired",
            tablePath, e.fileName);
        return Optional.empty();
      }
    }
    return latest;
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
              return Optional.of(entryOf(rs));
            }
          }
        });
  }

  private static ExternalCommitEntry entryOf(ResultSet rs) throws SQLException {
    long expire = rs.getLong(5);
    Long expireTime = rs.wasNull() ? null : expire;
    return new ExternalCommitEntry(
        new Path(rs.getString(1)), rs.getString(2), rs.getString(3), rs.getBoolean(4), expireTime);
  }

  private interface Work<T> {
    T run(Connection conn) throws SQLException;
  }

  /** Runs `work` in autocommit (each statement is its own transaction); one retry on a new
   * connection, so a restarted database costs a reconnect, not a failed commit. A statement that
   * fails twice is an IOException: Delta then fails the commit, nothing is half done. */
  private <T> T withConnection(Work<T> work) throws IOException {
    SQLException last = null;
    boolean timedOut = false;
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
        timedOut |= isTimeout(e);
        closeQuietly();
      }
    }
    // The URL only: the password is a separate property and never part of a message.
    if (timedOut) {
      throw new IOException(
          "Delta commit coordinator at " + url + " did not answer in time (" + PREFIX + "socket_timeout="
              + socketTimeoutS + " s, login_timeout=" + credentials.getProperty("loginTimeout")
              + " s; tried twice, the second time on a new connection): " + last.getMessage(),
          last);
    }
    throw new IOException("Delta commit coordinator at " + url + " failed: " + last.getMessage(), last);
  }

  /** A read that hit socketTimeout, or a login that hit loginTimeout (pgjdbc: "Connection attempt
   * timed out."). */
  private static boolean isTimeout(SQLException e) {
    for (Throwable cause = e; cause != null; cause = cause.getCause()) {
      if (cause instanceof SocketTimeoutException) return true;
      String message = cause.getMessage();
      if (message != null && message.contains("timed out")) return true;
    }
    return false;
  }

  private void ensureTable(Connection conn) throws SQLException {
    if (tableReady) return;
    // A role without CREATE on the schema (an administrator made the table and granted only
    // SELECT, INSERT, UPDATE, DELETE) may not run even CREATE TABLE IF NOT EXISTS on an existing
    // table in PostgreSQL: look first, create only when it is missing.
    try (Statement st = conn.createStatement()) {
      st.executeQuery("SELECT 1 FROM " + table + " WHERE 1 = 0").close();
      tableReady = true;
      return;
    } catch (SQLException e) {
      if (!"42P01".equals(e.getSQLState())) throw e; // 42P01: undefined_table
    }
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
