"""The AR half teacher-forced: the Qwen3 LM over (prompt, frames) and the depth decoder over each
frame's codes, exactly as the reference's generation loop computes them one step at a time
(`diffusers/modular_pipelines/minimax_music3/encoders.py`), but for whole sequences at once.

Sequence layout: the prompt ends in <|audio_start|>; then a priming frame (silent codes, whose
hiddens the reference discards), then the song's frames. The LM's output at the position before
frame j predicts frame j's c0; after the last frame it predicts <|audio_end|>."""

import torch
import torch.nn.functional as F
from diffusers import MiniMaxMusic3RVQDepthDecoder
from transformers import Qwen3Config, Qwen3ForCausalLM

import sizes


def build(vocab_size: int):
    lm = Qwen3ForCausalLM(Qwen3Config(**dict(sizes.LM, vocab_size=vocab_size)))
    depth = MiniMaxMusic3RVQDepthDecoder(**sizes.DEPTH)
    return lm, depth


def priming_frame(codes: torch.Tensor) -> torch.Tensor:
    """Silent codes carrying the song's timbre (c6 without the beat position)."""
    frame = torch.zeros_like(codes[:1])
    frame[0, 6] = codes[0, 6] % 64
    return frame


def frame_embeddings(lm, depth, codes: torch.Tensor, offset: int) -> torch.Tensor:
    """codes [..., 8] -> the feedback embeddings [..., H] (`_embed_audio_frame`)."""
    vocab = sizes.DEPTH["audio_vocab_size"]
    e = lm.model.embed_tokens(codes[..., 0] + offset)
    shifts = torch.arange(7, device=codes.device) * vocab
    e = e + depth.audio_embeddings(codes[..., 1:] + shifts).sum(-2)
    return e * 8**-0.5


def forward(lm, depth, prompt: torch.Tensor, mask: torch.Tensor, codes: torch.Tensor, offset: int):
    """prompt [B, P] ids, left-padded, with its padding mask; codes [B, N, 8] (priming frame
    first; rows past a song's end padded). Returns the LM's hidden before each frame and after
    the last [B, N+1, H], and the depth decoder's hiddens at positions 1..7 [B, N, 7, H]."""
    b, n = codes.shape[:2]
    full_mask = torch.cat([mask, torch.ones(b, n, dtype=mask.dtype, device=mask.device)], 1)
    positions = (full_mask.cumsum(1) - 1).clamp(min=0)
    text = lm.model.embed_tokens(prompt)
    frames = frame_embeddings(lm, depth, codes, offset)
    hidden = lm.model(
        inputs_embeds=torch.cat([text, frames], 1), attention_mask=full_mask, position_ids=positions
    ).last_hidden_state
    before = hidden[:, prompt.shape[1] - 1 :]  # position P-1 (<|audio_start|>) predicts frame 0
    vocab = sizes.DEPTH["audio_vocab_size"]
    c0 = lm.model.embed_tokens(codes[..., 0] + offset)
    residual = depth.audio_embeddings(codes[..., 1:7] + torch.arange(6, device=codes.device) * vocab)
    inputs = torch.cat([before[:, :n, None], c0[:, :, None], residual], 2)  # [B, N, 8, H]
    out = depth(depth.projection(inputs.reshape(b * n, 8, -1)))
    return before, out[:, 1:].reshape(b, n, 7, -1)


def losses(lm, depth, before, depth_hidden, codes, lengths, offset: int, end_id: int):
    """Cross-entropy of c0 (over the sampleable rows: the codes and <|audio_end|>) and of c1..c7,
    over real frames only."""
    n = codes.shape[1]
    semantic = sizes.CONSTANTS["semantic_vocab_size"]
    head = lm.lm_head.weight
    rows = torch.cat([head[offset : offset + semantic], head[end_id : end_id + 1]])
    logits = before @ rows.T  # [B, N+1, S+1]
    target = torch.cat([codes[..., 0], torch.zeros_like(codes[:, :1, 0])], 1)
    positions = torch.arange(n + 1, device=codes.device)[None]
    target = torch.where(positions == lengths[:, None], semantic, target)  # the end after the last frame
    valid = positions <= lengths[:, None]
    c0_loss = F.cross_entropy(logits[valid].float(), target[valid])
    frame_valid = positions[:, :n] < lengths[:, None]
    depth_loss = 0.0
    for k in range(7):
        logits_k = depth.audio_heads[k](depth_hidden[:, :, k])
        depth_loss = depth_loss + F.cross_entropy(logits_k[frame_valid].float(), codes[..., k + 1][frame_valid])
    return c0_loss, depth_loss / 7


def hidden_distance(before, depth_hidden, t_before, t_depth, valid) -> torch.Tensor:
    """The mean squared distance of the student's frame hiddens to the teacher's over the frames
    `valid` [B, N] (0 where there are none)."""
    student = frame_hiddens(before, depth_hidden).float()
    target = frame_hiddens(t_before, t_depth).float()
    return ((student - target) ** 2).mean(-1)[valid].mean() if valid.any() else student.sum() * 0


def frame_hiddens(before, depth_hidden) -> torch.Tensor:
    """What conditions the DiT: for each frame [LM hidden, depth h1..h7] -> [B, N, 8*H]."""
    n = depth_hidden.shape[1]
    return torch.cat([before[:, :n, None], depth_hidden], 2).flatten(2)
