//! The server-side layer: a server's own requests admitted through a
//! limiter, a refusal answered with a response.
//!
//! [`ShedLayer`] (`layer.rs`, with the settings it hands its services) →
//! [`Shed`] (`service.rs`) → [`ShedFuture`] (`future.rs`, which also writes
//! the refusal).

mod future;
mod layer;
mod service;

pub use future::ShedFuture;
pub use layer::{server_outcome, ShedLayer};
pub use service::Shed;
