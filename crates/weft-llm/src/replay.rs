//! Cross-provider replay (being written).
