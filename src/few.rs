//! A vector that keeps its first few items inline: `CL.THROTTLEALL` holds
//! one entry per limiter, real calls combine a few limits, and two heap
//! allocations per call cost more than some of the limiters' own work.

pub struct Few<T, const N: usize> {
    inline: [Option<T>; N],
    len: usize,
    /// The items after the first `N`.
    rest: Vec<T>,
}

impl<T, const N: usize> Few<T, N> {
    pub fn new() -> Self {
        Self {
            inline: [const { None }; N],
            len: 0,
            rest: Vec::new(),
        }
    }

    pub fn push(&mut self, item: T) {
        match self.inline.get_mut(self.len) {
            Some(slot) => *slot = Some(item),
            None => self.rest.push(item),
        }
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> + Clone {
        self.inline.iter().flatten().chain(self.rest.iter())
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.inline.iter_mut().flatten().chain(self.rest.iter_mut())
    }
}
