//! [`GrpcCode`]: the status codes of gRPC, read from a `grpc-status`
//! without ever failing. The one list of them: the tower classifiers, the
//! server's `ShedLayer` and the configuration file's `grpc` tables all
//! name codes through it, whatever features are on.

use std::fmt;

/// The status codes of gRPC, by number (`grpc-status`).
///
/// A number outside 0–16, or a `grpc-status` that is no number at all, is
/// [`Unknown`](Self::Unknown), as gRPC's status code specification says a
/// client must take it.
///
/// # Examples
///
/// ```
/// use rheostat::grpc::GrpcCode;
///
/// assert_eq!(GrpcCode::from_i32(14), GrpcCode::Unavailable);
/// assert_eq!(GrpcCode::from_i32(99), GrpcCode::Unknown);
/// assert_eq!(GrpcCode::parse(b"8"), GrpcCode::ResourceExhausted);
/// assert_eq!(GrpcCode::parse(b"fourteen"), GrpcCode::Unknown);
/// assert_eq!(GrpcCode::from_name("resource_exhausted"), Some(GrpcCode::ResourceExhausted));
/// assert_eq!(GrpcCode::Unavailable.name(), "unavailable");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GrpcCode {
    /// 0: not an error.
    Ok = 0,
    /// 1: cancelled, usually by the caller.
    Cancelled = 1,
    /// 2: an error the server could not say more about.
    Unknown = 2,
    /// 3: the caller sent an invalid argument.
    InvalidArgument = 3,
    /// 4: the deadline ran out before the call ended.
    DeadlineExceeded = 4,
    /// 5: some requested entity was not found.
    NotFound = 5,
    /// 6: the entity the caller tried to create already exists.
    AlreadyExists = 6,
    /// 7: the caller may not do this.
    PermissionDenied = 7,
    /// 8: a resource ran out: a quota, or the server's capacity.
    ResourceExhausted = 8,
    /// 9: the system is not in the state the call needs.
    FailedPrecondition = 9,
    /// 10: aborted, typically by a concurrency conflict.
    Aborted = 10,
    /// 11: an operation past the valid range.
    OutOfRange = 11,
    /// 12: the method is not implemented or not supported.
    Unimplemented = 12,
    /// 13: an invariant the server expects is broken.
    Internal = 13,
    /// 14: the service is unavailable for now.
    Unavailable = 14,
    /// 15: unrecoverable data loss or corruption.
    DataLoss = 15,
    /// 16: the caller's credentials are missing or invalid.
    Unauthenticated = 16,
}

impl GrpcCode {
    /// Every code, in order of its number.
    pub const ALL: [GrpcCode; 17] = [
        GrpcCode::Ok,
        GrpcCode::Cancelled,
        GrpcCode::Unknown,
        GrpcCode::InvalidArgument,
        GrpcCode::DeadlineExceeded,
        GrpcCode::NotFound,
        GrpcCode::AlreadyExists,
        GrpcCode::PermissionDenied,
        GrpcCode::ResourceExhausted,
        GrpcCode::FailedPrecondition,
        GrpcCode::Aborted,
        GrpcCode::OutOfRange,
        GrpcCode::Unimplemented,
        GrpcCode::Internal,
        GrpcCode::Unavailable,
        GrpcCode::DataLoss,
        GrpcCode::Unauthenticated,
    ];

    /// The code numbered `number` (tonic's `status.code() as i32`),
    /// [`Unknown`](Self::Unknown) outside 0–16.
    pub fn from_i32(number: i32) -> GrpcCode {
        usize::try_from(number)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
            .unwrap_or(GrpcCode::Unknown)
    }

    /// The code a `grpc-status` value names: its decimal number,
    /// [`Unknown`](Self::Unknown) if it is not one of 0–16 written in ASCII
    /// digits (empty, signed, padded, garbage).
    pub fn parse(value: &[u8]) -> GrpcCode {
        if value.is_empty() || value.len() > 2 || !value.iter().all(u8::is_ascii_digit) {
            return GrpcCode::Unknown;
        }
        let number = value
            .iter()
            .fold(0, |n, digit| n * 10 + i32::from(digit - b'0'));
        Self::from_i32(number)
    }

    /// Its number.
    pub fn as_i32(self) -> i32 {
        self as i32
    }

    /// Its name, in lower case (`"resource_exhausted"`): as a
    /// configuration file writes it.
    pub fn name(self) -> &'static str {
        match self {
            GrpcCode::Ok => "ok",
            GrpcCode::Cancelled => "cancelled",
            GrpcCode::Unknown => "unknown",
            GrpcCode::InvalidArgument => "invalid_argument",
            GrpcCode::DeadlineExceeded => "deadline_exceeded",
            GrpcCode::NotFound => "not_found",
            GrpcCode::AlreadyExists => "already_exists",
            GrpcCode::PermissionDenied => "permission_denied",
            GrpcCode::ResourceExhausted => "resource_exhausted",
            GrpcCode::FailedPrecondition => "failed_precondition",
            GrpcCode::Aborted => "aborted",
            GrpcCode::OutOfRange => "out_of_range",
            GrpcCode::Unimplemented => "unimplemented",
            GrpcCode::Internal => "internal",
            GrpcCode::Unavailable => "unavailable",
            GrpcCode::DataLoss => "data_loss",
            GrpcCode::Unauthenticated => "unauthenticated",
        }
    }

    /// The code named `name`, in lower case (`"unavailable"`) or as gRPC
    /// writes it (`"UNAVAILABLE"`); `None` for any other text.
    pub fn from_name(name: &str) -> Option<GrpcCode> {
        Self::ALL
            .into_iter()
            .find(|code| name.eq_ignore_ascii_case(code.name()))
    }

    /// The code a response with HTTP status `status` and no `grpc-status`
    /// stands for, as gRPC's HTTP-to-gRPC status mapping says: 400 is
    /// `INTERNAL`, 401 `UNAUTHENTICATED`, 403 `PERMISSION_DENIED`, 404
    /// `UNIMPLEMENTED`, 429, 502, 503 and 504 `UNAVAILABLE`, any other
    /// `UNKNOWN` (a 200 without a status too: the status must come later).
    #[cfg(feature = "http")]
    pub fn from_http(status: http::StatusCode) -> GrpcCode {
        match status.as_u16() {
            400 => GrpcCode::Internal,
            401 => GrpcCode::Unauthenticated,
            403 => GrpcCode::PermissionDenied,
            404 => GrpcCode::Unimplemented,
            429 | 502 | 503 | 504 => GrpcCode::Unavailable,
            _ => GrpcCode::Unknown,
        }
    }

    /// Its bit in a set of codes.
    #[cfg(feature = "http")]
    pub(crate) fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

impl fmt::Display for GrpcCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::GrpcCode;

    #[test]
    fn a_malformed_status_is_unknown() {
        for garbage in [
            "", "-1", "+5", "17", "999", "014", "1 4", "ok", "14.0", "\u{0661}",
        ] {
            assert_eq!(
                GrpcCode::parse(garbage.as_bytes()),
                GrpcCode::Unknown,
                "{garbage:?}"
            );
        }
        assert_eq!(GrpcCode::parse(b"04"), GrpcCode::DeadlineExceeded);
        assert_eq!(GrpcCode::from_i32(-3), GrpcCode::Unknown);
        assert_eq!(GrpcCode::from_i32(i32::MAX), GrpcCode::Unknown);
    }

    #[test]
    fn names_round_trip_in_either_case() {
        for code in GrpcCode::ALL {
            assert_eq!(GrpcCode::from_name(code.name()), Some(code));
            assert_eq!(GrpcCode::from_name(&code.name().to_uppercase()), Some(code));
            assert_eq!(GrpcCode::from_i32(code.as_i32()), code);
        }
        assert_eq!(GrpcCode::from_name("unavailable "), None);
        assert_eq!(GrpcCode::from_name("14"), None);
    }
}
