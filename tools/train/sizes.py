"""The small Music3's geometry: the real architecture at small width. Each dict is the component's
config (diffusers / transformers keyword arguments)."""

# Filled in by the tokenizer (its size fixes the code offset and the LM vocabulary).
CONSTANTS = {"audio_end_id": None, "audio_cfg_id": None, "code_offset": None, "semantic_vocab_size": 4096}
HIDDEN = 256
LM = dict(
    vocab_size=None,
    hidden_size=HIDDEN,
    intermediate_size=768,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=64,
    rope_theta=1e6,
    rms_norm_eps=1e-6,
    max_position_embeddings=2048,
    tie_word_embeddings=False,
)
DEPTH = dict(
    hidden_size=HIDDEN,
    num_layers=2,
    num_attention_heads=4,
    intermediate_size=512,
    audio_vocab_size=256,
    num_codebooks=8,
    max_position_embeddings=16,
)
LATENT_CHANNELS = 64
CONDITION = dict(condition_hidden_dim=HIDDEN, num_condition_layers=8, out_dim=256)
DIT = dict(
    in_channels=LATENT_CHANNELS,
    condition_dim=256,
    num_layers=6,
    num_attention_heads=8,
    attention_head_dim=32,
    ff_inner_dim=1024,
    rotary_dim=16,
    fourier_embedding_dim=64,
)
VOCODER = dict(latent_channels=LATENT_CHANNELS, decoder_input_dim=256, decoder_hidden_dim=256, upsampling_ratios=(8, 8, 4, 2))
HOP = 512
WINDOW_FRAMES = 200
