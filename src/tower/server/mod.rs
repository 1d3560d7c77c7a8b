//! The server-side layer: a server's own requests admitted through a
//! limiter, a refusal answered with a response.
//!
//! [`ShedLayer`] (`layer.rs`, with the settings it hands its services in
//! `settings.rs`) → [`Shed`] (`service.rs`) → [`ShedFuture`] (`future.rs`,
//! which also writes the refusal and the timeout's answer).

mod future;
mod layer;
mod service;
mod settings;

pub use layer::ShedLayer;
pub use service::Shed;
pub use settings::server_outcome;
