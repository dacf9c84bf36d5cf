//! Entry points for the fuzz targets in the repository's `fuzz/` directory: each provider's
//! stream decoder over raw body bytes, with no network in between. Not a stable API; built
//! only with the `fuzzing` feature.

use std::sync::Arc;

use crate::anthropic::EventDecoder;
use crate::http::decode_pieces;
use crate::openai::ChunkDecoder;
use crate::{ModelError, SseLimits, StreamEvent};

/// What the OpenAI client makes of a response body that arrives in these pieces.
pub fn openai_stream(
    pieces: Vec<Vec<u8>>,
    limits: SseLimits,
) -> Vec<Result<StreamEvent, ModelError>> {
    decode_pieces(ChunkDecoder::new(Arc::from("openai")), pieces, limits)
}

/// What the Anthropic client makes of a response body that arrives in these pieces.
pub fn anthropic_stream(
    pieces: Vec<Vec<u8>>,
    limits: SseLimits,
) -> Vec<Result<StreamEvent, ModelError>> {
    decode_pieces(EventDecoder::new(Arc::from("anthropic")), pieces, limits)
}
