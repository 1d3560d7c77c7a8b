//! The slab the loop keeps its jobs and requests in: ids that carry a
//! generation, so that a stale event finds nothing.

/// A slab whose ids carry a generation, so a stale event finds nothing.
pub(super) struct Slab<T> {
    pub(super) entries: Vec<(u32, Option<T>)>,
    pub(super) free: Vec<u32>,
}

impl<T> Slab<T> {
    pub(super) fn new() -> Self {
        Slab {
            entries: Vec::new(),
            free: Vec::new(),
        }
    }

    pub(super) fn insert(&mut self, value: T) -> u64 {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.entries.push((0, None));
                u32::try_from(self.entries.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let entry = &mut self.entries[index as usize];
        entry.1 = Some(value);
        (u64::from(entry.0) << 32) | u64::from(index)
    }

    pub(super) fn split(id: u64) -> (usize, u32) {
        ((id & 0xFFFF_FFFF) as usize, (id >> 32) as u32)
    }

    pub(super) fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        let (index, generation) = Self::split(id);
        match self.entries.get_mut(index) {
            Some((g, Some(v))) if *g == generation => Some(v),
            _ => None,
        }
    }

    pub(super) fn remove(&mut self, id: u64) -> Option<T> {
        let (index, generation) = Self::split(id);
        match self.entries.get_mut(index) {
            Some((g, slot)) if *g == generation && slot.is_some() => {
                *g = g.wrapping_add(1);
                self.free.push(index as u32);
                slot.take()
            }
            _ => None,
        }
    }
}
