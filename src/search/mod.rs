//! The search pipeline: fusion and boosting (the cascade is added by the service layer).

pub mod boosting;
pub mod boosting_config;
pub mod fusion;
