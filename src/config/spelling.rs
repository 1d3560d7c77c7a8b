//! Names that look like misspellings of one another: a limiter's table
//! that lacks its policy, beside another whose name is a letter or two
//! away (`[limiters.payments]` and `[limiters.payment.policy]`), is most
//! likely one limiter spelled two ways.

use super::locate::Document;

/// The most edits (a letter added, removed, replaced, or two swapped) by
/// which two names of `len` letters (the shorter's) may differ and still
/// look like one name misspelled: one per three letters, as rustc's
/// suggestions allow, so `db1` and `db2` (one edit) do, `db` and `mq` (two)
/// do not.
fn most_edits(len: usize) -> usize {
    len.max(3) / 3
}

/// The other limiter of `document` whose name looks most like a
/// misspelling of the limiter `name` there (the first in file order of
/// those fewest edits away), as the table the file writes it by:
/// `limiters.<other>.policy` if it has a policy table, else
/// `limiters.<other>`; and that table's line.
pub(super) fn near_limiter(document: &Document<'_>, name: &str) -> Option<(String, Option<usize>)> {
    let names = document.keys("limiters");
    if !names.iter().any(|n| n == name) {
        return None;
    }
    let (other, _) = names
        .into_iter()
        .filter(|other| other != name)
        .filter_map(|other| {
            let edits = edits(name, &other);
            let shorter = name.chars().count().min(other.chars().count());
            (edits <= most_edits(shorter)).then_some((other, edits))
        })
        .min_by_key(|(_, edits)| *edits)?;
    let policy = format!("limiters.{other}.policy");
    let table = if document.find(&policy).whole {
        policy
    } else {
        format!("limiters.{other}")
    };
    let line = document.find(&table).line;
    Some((table, line))
}

/// The edits that turn `a` into `b`: letters added, removed or replaced,
/// and two neighbours swapped (the optimal string alignment distance).
/// Quadratic in the names' lengths, which a file of at most 1 MiB bounds;
/// asked only of a file already refused.
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // Three rows of the table: two back, one back, this one.
    let mut before: Vec<usize> = Vec::new();
    let mut last: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut row = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let replace = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + replace);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(before[j - 2] + 1);
            }
        }
        before = std::mem::replace(&mut last, row);
    }
    last[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_count_letters_added_removed_replaced_and_swapped() {
        assert_eq!(edits("payments", "payments"), 0);
        assert_eq!(edits("payments", "payment"), 1);
        assert_eq!(edits("payment", "payments"), 1);
        assert_eq!(edits("payments", "paymants"), 1);
        assert_eq!(edits("payments", "paymetns"), 1);
        assert_eq!(edits("search", "serach"), 1);
        assert_eq!(edits("", "abc"), 3);
        assert_eq!(edits("kitten", "sitting"), 3);
    }

    #[test]
    fn a_name_a_letter_or_two_away_is_near_and_another_is_not() {
        let text = "[limiters.payments]\nmax_wait = \"1s\"\n\n[limiters.payment.policy]\n\
                    policy = \"fixed\"\nlimit = 1\n\n[limiters.search]\n";
        let document = Document::parse(text, super::super::tree::Format::Toml);
        assert_eq!(
            near_limiter(&document, "payments"),
            Some(("limiters.payment.policy".to_owned(), Some(4)))
        );
        assert_eq!(
            near_limiter(&document, "payment"),
            Some(("limiters.payments".to_owned(), Some(1)))
        );
        assert_eq!(near_limiter(&document, "search"), None);
    }
}
