//! Reading a configuration file: only a regular file (a symbolic link to
//! one is followed), opened so that nothing in its place can block the
//! reader, and bounded in size; and a live file read settled (never half
//! written) and not parsed again while its bytes are those last read.

use std::fs::{File, Metadata};
use std::hash::{BuildHasher, RandomState};
use std::io::Read as _;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use super::file::{ConfigFileError, MAX_FILE_BYTES};

/// How long after its last change a file is taken as written whole on one
/// read (if it did not change while read). A change within it may not show
/// in the file's times yet: 2 s is the coarsest file time in common use
/// (FAT's).
const QUIET: Duration = Duration::from_secs(2);

/// How far apart two reads of a file changed within [`QUIET`] are made,
/// which must agree before it applies. Longer than the pauses of a writer
/// that writes a file in a few calls in a row (an editor, a template tool,
/// `echo >`); a writer that may pause longer mid-file writes elsewhere and
/// renames the file into place.
const SETTLE: Duration = Duration::from_millis(100);

/// How many reads [`SETTLE`] apart a file that keeps changing is given to
/// agree before the reload is refused: a second of them.
const MAX_READS: usize = 10;

/// How long the refusal of bytes unchanged is given again without parsing
/// them. A refusal can lapse with time (an override more than a week
/// ahead comes within a week), so bytes refused are parsed again, but once
/// a minute rather than every period: a hostile file of 1 MiB took over a
/// second to parse.
const REPARSE_REFUSED: Duration = Duration::from_secs(60);

/// What a file's metadata says of its bytes: any write, truncation or
/// rename into place changes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    /// Where the inode's own time is kept (unix): it changes with every
    /// write and rename, and cannot be set back as the modified time can.
    changed: Option<SystemTime>,
    /// Which file it is (unix): device and inode.
    id: (u64, u64),
}

impl Stamp {
    fn of(meta: &Metadata) -> Self {
        #[cfg(unix)]
        let (changed, id) = {
            use std::os::unix::fs::MetadataExt;
            let changed = u64::try_from(meta.ctime()).ok().and_then(|secs| {
                let nanos = u32::try_from(meta.ctime_nsec()).unwrap_or(0);
                SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
            });
            (changed, (meta.dev(), meta.ino()))
        };
        #[cfg(not(unix))]
        let (changed, id) = (None, (0, 0));
        Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            changed,
            id,
        }
    }

    /// Whether the file's last change was at least [`QUIET`] before `now`.
    fn quiet_at(&self, now: SystemTime) -> bool {
        let last = self.modified.max(self.changed);
        last.is_some_and(|last| now.duration_since(last).is_ok_and(|d| d >= QUIET))
    }
}

/// The text of the file at `path`: refused unless it is a regular file, and
/// without being read whole if it holds more than [`MAX_FILE_BYTES`] (its
/// length as the file system says, and what reading it gives: a file may
/// grow).
pub(super) fn read_bounded(path: &Path) -> Result<String, ConfigFileError> {
    read_once(path).map(|(text, _, _)| text)
}

/// The text of the file at `path`, with its stamp when opened and when
/// read.
fn read_once(path: &Path) -> Result<(String, Stamp, Stamp), ConfigFileError> {
    let unreadable = |e: std::io::Error| ConfigFileError::unreadable(path, &e);
    // Before opening: opening a FIFO waits for a writer, a device may do
    // anything.
    regular(path, &std::fs::metadata(path).map_err(unreadable)?)?;
    let file = open(path).map_err(unreadable)?;
    // What was opened: the path may have been swapped in between.
    let meta = file.metadata().map_err(unreadable)?;
    regular(path, &meta)?;
    let limit = MAX_FILE_BYTES as u64;
    if meta.len() > limit {
        return Err(ConfigFileError::too_large(meta.len()).in_file(path));
    }
    let mut text = String::new();
    (&file)
        .take(limit + 1)
        .read_to_string(&mut text)
        .map_err(unreadable)?;
    if text.len() as u64 > limit {
        return Err(ConfigFileError::too_large(text.len() as u64).in_file(path));
    }
    let after = file.metadata().map_err(unreadable)?;
    Ok((text, Stamp::of(&meta), Stamp::of(&after)))
}

/// Open `path` to read, never waiting: a FIFO put in place after the check
/// opens at once (and is then refused) rather than waiting for a writer. A
/// regular file ignores the flag.
fn open(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

/// Refuse what `meta` describes unless it is a regular file.
fn regular(path: &Path, meta: &Metadata) -> Result<(), ConfigFileError> {
    if meta.is_file() {
        return Ok(());
    }
    let kind = meta.file_type();
    let found = if kind.is_dir() {
        "a directory"
    } else {
        special(kind)
    };
    let error = std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "found {found}, expected a regular file (a symbolic link to one is followed): \
             anything else can block the reader or never end"
        ),
    );
    Err(ConfigFileError::unreadable(path, &error))
}

#[cfg(unix)]
fn special(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_char_device() {
        "a character device"
    } else {
        "neither a file nor a directory"
    }
}

#[cfg(not(unix))]
fn special(_: std::fs::FileType) -> &'static str {
    "neither a file nor a directory"
}

/// The text of the live file at `path` once settled, its stamp, and whether
/// the file was quiet: read once if it last changed at least [`QUIET`]
/// before and did not change while read; otherwise read again [`SETTLE`]
/// later until two reads agree, [`MAX_READS`] times at most.
fn read_settled(path: &Path) -> Result<(String, Stamp, bool), ConfigFileError> {
    let mut last: Option<String> = None;
    for _ in 0..MAX_READS {
        let (text, before, after) = read_once(path)?;
        if before == after && after.quiet_at(SystemTime::now()) {
            return Ok((text, after, true));
        }
        if last.as_ref() == Some(&text) {
            return Ok((text, after, false));
        }
        last = Some(text);
        std::thread::sleep(SETTLE);
    }
    let error = std::io::Error::other(format!(
        "it changed between every two reads {} ms apart, {MAX_READS} times: \
         write the file elsewhere and rename it into place",
        SETTLE.as_millis()
    ));
    Err(ConfigFileError::unreadable(path, &error))
}

/// What a live file's last read found, so that bytes already read are not
/// parsed again.
#[derive(Debug)]
pub(super) struct Seen {
    hasher: RandomState,
    /// The stamp of the last bytes read, and whether the file was quiet
    /// then: a stamp taken once the file was quiet stands for its bytes,
    /// since any later change changes it.
    stamp: Option<(Stamp, bool)>,
    /// The hash of the last bytes read, and the refusal they met, if any,
    /// with when.
    last: Option<(u64, Option<(ConfigFileError, Instant)>)>,
}

/// What reading a live file found.
pub(super) enum Reading {
    /// The bytes last read, which applied.
    Unchanged,
    /// The bytes last read, refused less than [`REPARSE_REFUSED`] ago.
    Refused(ConfigFileError),
    /// Bytes to parse.
    Changed(Read),
}

/// Bytes read from a live file, to parse and then [record](Seen::record).
pub(super) struct Read {
    pub(super) text: String,
    hash: u64,
    stamp: (Stamp, bool),
}

impl Seen {
    pub(super) fn new() -> Self {
        Seen {
            hasher: RandomState::new(),
            stamp: None,
            last: None,
        }
    }

    /// Read the live file at `path`, settled, unless its stamp says it is
    /// as last read and applied; say whether its bytes are new.
    pub(super) fn read(&mut self, path: &Path) -> Result<Reading, ConfigFileError> {
        let applied = matches!(self.last, Some((_, None)));
        if applied {
            let meta =
                std::fs::metadata(path).map_err(|e| ConfigFileError::unreadable(path, &e))?;
            regular(path, &meta)?;
            if self.stamp == Some((Stamp::of(&meta), true)) {
                return Ok(Reading::Unchanged);
            }
        }
        let (text, stamp, quiet) = read_settled(path)?;
        let hash = self.hasher.hash_one(text.as_bytes());
        match &self.last {
            Some((last, None)) if *last == hash => {
                self.stamp = Some((stamp, quiet));
                Ok(Reading::Unchanged)
            }
            Some((last, Some((error, at)))) if *last == hash && at.elapsed() < REPARSE_REFUSED => {
                self.stamp = Some((stamp, quiet));
                Ok(Reading::Refused(error.clone()))
            }
            _ => Ok(Reading::Changed(Read {
                text,
                hash,
                stamp: (stamp, quiet),
            })),
        }
    }

    /// What the bytes `read` met: applied, or `refused`.
    pub(super) fn record(&mut self, read: &Read, refused: Option<&ConfigFileError>) {
        self.stamp = Some(read.stamp);
        self.last = Some((read.hash, refused.map(|e| (e.clone(), Instant::now()))));
    }
}
