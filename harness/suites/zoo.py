"""The model zoo: dynamo's three model lists, built offline, every model a case.

PyTorch's accuracy and performance dashboards run three lists (``benchmarks/dynamo/``): Hugging Face
(``huggingface_models_list.txt``), timm (``timm_models_list.txt``) and TorchBench (``pytorch/benchmark``'s
``torchbenchmark/models``). The out-of-tree accelerator proposal names the same three. Every row of each
list is a case here, under the list's own name (``zoo.<list>.<name>``):

* **huggingface**: the model class built from its default config, as dynamo builds it, or from the
  named checkpoint's published sizes where dynamo reads a config from the Hub (``EXTRA_MODELS`` and the
  LLMs). dynamo's sequence lengths; dynamo's input rules (``decoder_input_ids`` for encoder-decoders,
  ``pad_token_id = 0`` for GPT-2/Neo/J classifiers and RoBERTa, RoBERTa fed zeros). The LLMs run the
  forward pass over dynamo's 1,000-token prompt (the prefill): generation's decode loop is not one
  program.
* **timm**: ``timm.create_model(name, pretrained=False)`` at the model's own evaluation input size (its
  ``pretrained_cfg``'s test size, else its input size), as dynamo's ``timm_models.py`` resolves it for inference.
* **torchbench**: the rows whose model lives in a pip-installable library (torchvision, timm,
  transformers, torch_geometric) are built the same way from it, with TorchBench's own arguments (the GNNs
  on a seeded random graph in place of TorchBench's Reddit subgraph); every other row is UNAVAILABLE with
  the reason, so the table's rows are TorchBench's names.

Weights are seeded random; nothing is downloaded. The batch is 1: the lists' batch sizes (``batch`` in
the spec) are sized for a 40 GB A100, these run on CPUs and vendors' devices alike.

Each model states its task and how it is judged beyond the element-wise rule (dynamo's rule on eager and
compiled recipes): ``lm`` token agreement, ``classifier`` top-1 agreement, ``features`` and
``detection`` element-wise only.

Sizes: ``zoo_sizes.json`` holds each model's parameter count and input size, measured by building it on
the meta device (``python -m harness.suites.zoo --sizes``, which rewrites the file). From it each case
declares the memory a worker needs (``memory_gb``): a model that cannot fit under the worker memory
limit is SKIP with both figures, never killed half-way. Where a sweep's worker was killed out of memory
(``--peaks RESULTS.jsonl``), the row keeps that as a floor for that recipe on that version pair, named by its
executorch release (``floors`` in the sizes file, ``memory_floors`` in the spec: "xnnpack@1.4", "onnxruntime@1.5"),
so the next sweep there on a worker as small skips it instead of crashing on it again, every week. Other recipes and
releases keep the estimate.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import glob
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.cases.case import Case
from harness.cases.contract import REPRO_ON_REQUEST, Judgement
from harness.errors import UserError
from harness.settings import seconds_or_none
from harness.status import Status
from harness.suites.zoo_builders import BUILDERS, estimate_batch_norm, vocab

HERE = Path(__file__).parent
SIZES = HERE / "zoo_sizes.json"
LISTS = ("huggingface", "timm", "torchbench")
# a worker holds the fp32 weights several times over: the model, its float64 reference copy (twice the
# bytes), and for a lowering backend the lowered blob, the serialized program and the loaded program; eager
# recipes hold only the first two. The outputs (an LM's logits: sequence × vocabulary) are held many times over
# too: the reference, the float64 reference, the device's, their comparisons. (weights, outputs) factors,
# fitted to the zoo sweep's peak RSS per item in docs/measurements.md#zoo
MEMORY_FACTOR = (6.0, 16.0)
EAGER_FACTOR = (4.0, 10.0)
MEMORY_BASE_GB = 1.5  # a forked worker starts near the parent: torch, executorch and the backends imported


@dataclass(frozen=True)
class ZooModel:
    name: str  # the list's own name
    list: str  # huggingface | timm | torchbench
    builder: str  # hf | timm | tv | tv-detection | "" (unavailable)
    target: str = ""  # transformers class | timm model name | torchvision constructor
    config: dict[str, Any] = field(default_factory=dict)  # config overrides (hf) or keyword arguments (timm, tv)
    seq: int = 0  # the sequence length (hf)
    batch: int = 1  # the list's own batch size (recorded; bti runs batch 1)
    task: str = ""  # lm | classifier | features | detection
    inputs: str = "ids"  # ids | zeros | audio | clip | image | images
    unavailable: str = ""  # why bti cannot build it here

    @property
    def id(self) -> str:
        return f"zoo.{self.list}.{self.name.replace('/', '_')}"


def _dynamo_seq(name: str) -> int:
    """dynamo's ``get_sequence_length`` (``benchmarks/dynamo/huggingface.py``)."""
    if name.startswith("Blenderbot"):
        return 128
    if name.startswith(("GPT2", "Bart", "T5", "PLBart", "MBart")) or name in ("AllenaiLongformerBase", "BigBird"):
        return 1024
    if name.startswith("OPT"):
        return 2048
    if name.startswith(("Albert", "Deberta", "Layout", "Electra", "XLNet", "MegatronBert", "Bert", "Roberta")) \
            or name in ("DistillGPT2", "GoogleFnet", "YituTechConvBert"):
        return 512
    if name == "TrOCRForCausalLM":
        return 256
    if name.startswith("MobileBert"):
        return 128
    return 128


def _hf_task(cls: str) -> str:
    return "classifier" if cls.endswith(("QuestionAnswering", "SequenceClassification")) else "lm"


T5_SMALL = {"d_model": 512, "d_ff": 2048, "num_layers": 6, "num_decoder_layers": 6, "num_heads": 8, "d_kv": 64, "vocab_size": 32128}
# the published sizes of the checkpoints whose configs dynamo reads from the Hub (nothing is downloaded here)
HUB_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "AllenaiLongformerBase": ("LongformerForMaskedLM", {"vocab_size": 50265, "max_position_embeddings": 4098, "type_vocab_size": 1,
                                                        "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
                                                        "attention_window": 512}),
    "T5Small": ("T5ForConditionalGeneration", T5_SMALL),
    "DistillGPT2": ("GPT2LMHeadModel", {"n_layer": 6}),
    "GoogleFnet": ("FNetForMaskedLM", {}),
    "YituTechConvBert": ("ConvBertForMaskedLM", {}),
    "CamemBert": ("CamembertForMaskedLM", {"vocab_size": 32005, "pad_token_id": 1, "max_position_embeddings": 514,
                                           "type_vocab_size": 1}),
    "meta-llama/Llama-3.2-1B": ("LlamaForCausalLM", {
        "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256, "max_position_embeddings": 131072,
        "rope_theta": 500000.0, "tie_word_embeddings": True, "rms_norm_eps": 1e-5,
        "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192, "rope_theta": 500000.0}}),
    "google/gemma-2-2b": ("Gemma2ForCausalLM", {
        "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8,
        "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 256000, "sliding_window": 4096,
        "query_pre_attn_scalar": 256, "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0}),
    "google/gemma-3-4b-it": ("Gemma3ForCausalLM", {
        "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34, "num_attention_heads": 8,
        "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 262208, "sliding_window": 1024,
        "query_pre_attn_scalar": 256}),
    "openai/whisper-tiny": ("WhisperForConditionalGeneration", {
        "d_model": 384, "encoder_layers": 4, "decoder_layers": 4, "encoder_attention_heads": 6,
        "decoder_attention_heads": 6, "encoder_ffn_dim": 1536, "decoder_ffn_dim": 1536, "vocab_size": 51865,
        "num_mel_bins": 80}),
    "Qwen/Qwen3-0.6B": ("Qwen3ForCausalLM", {
        "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
        "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": True,
        "rope_theta": 1000000.0, "max_position_embeddings": 40960}),
    "mistralai/Mistral-7B-Instruct-v0.3": ("MistralForCausalLM", {
        "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "vocab_size": 32768, "rope_theta": 1000000.0, "sliding_window": None}),
    "openai/gpt-oss-20b": ("GptOssForCausalLM", {
        "num_hidden_layers": 24, "num_local_experts": 32, "num_experts_per_tok": 4, "hidden_size": 2880,
        "intermediate_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
        "vocab_size": 201088, "sliding_window": 128}),
}
LLM_PROMPT = 1000  # dynamo's TextGenerationBenchmark.INPUT_LENGTH
# dynamo's huggingface_models_list.txt, in its order: name, batch size
HF_LIST = (
    ("AlbertForMaskedLM", 8), ("AlbertForQuestionAnswering", 8), ("AllenaiLongformerBase", 8), ("BartForCausalLM", 8),
    ("BartForConditionalGeneration", 4), ("BertForMaskedLM", 32), ("BertForQuestionAnswering", 32),
    ("BlenderbotForCausalLM", 32), ("BlenderbotForConditionalGeneration", 16), ("BlenderbotSmallForCausalLM", 256),
    ("BlenderbotSmallForConditionalGeneration", 128), ("CamemBert", 32), ("DebertaV2ForMaskedLM", 8),
    ("DebertaV2ForQuestionAnswering", 8), ("DistilBertForMaskedLM", 256), ("DistilBertForQuestionAnswering", 512),
    ("DistillGPT2", 32), ("ElectraForCausalLM", 64), ("ElectraForQuestionAnswering", 128), ("GPT2ForSequenceClassification", 8),
    ("GPTJForCausalLM", 1), ("GPTJForQuestionAnswering", 1), ("GPTNeoForCausalLM", 32), ("GPTNeoForSequenceClassification", 32),
    ("GoogleFnet", 32), ("LayoutLMForMaskedLM", 32), ("LayoutLMForSequenceClassification", 32),
    ("M2M100ForConditionalGeneration", 64), ("MBartForCausalLM", 8), ("MBartForConditionalGeneration", 4),
    ("MT5ForConditionalGeneration", 32), ("MegatronBertForCausalLM", 16), ("MegatronBertForQuestionAnswering", 16),
    ("MobileBertForMaskedLM", 256), ("MobileBertForQuestionAnswering", 256), ("OPTForCausalLM", 4), ("PLBartForCausalLM", 16),
    ("PLBartForConditionalGeneration", 8), ("PegasusForCausalLM", 128), ("PegasusForConditionalGeneration", 64),
    ("RobertaForCausalLM", 32), ("RobertaForQuestionAnswering", 32), ("T5ForConditionalGeneration", 8), ("T5Small", 8),
    ("TrOCRForCausalLM", 64), ("XGLMForCausalLM", 32), ("XLNetLMHeadModel", 16), ("YituTechConvBert", 32),
    ("meta-llama/Llama-3.2-1B", 8), ("google/gemma-2-2b", 8), ("google/gemma-3-4b-it", 8), ("openai/whisper-tiny", 8),
    ("Qwen/Qwen3-0.6B", 8), ("mistralai/Mistral-7B-Instruct-v0.3", 8), ("openai/gpt-oss-20b", 8),
)
# dynamo's timm_models_list.txt: name (with its pretrained tag), batch size
TIMM_LIST = (
    ("adv_inception_v3", 128), ("beit_base_patch16_224", 128), ("convnextv2_nano.fcmae_ft_in22k_in1k", 128),
    ("deit_base_distilled_patch16_224", 128), ("deit_tiny_patch16_224.fb_in1k", 128), ("dm_nfnet_f0", 128), ("ghostnet_100", 512),
    ("inception_v3", 128), ("mobilenetv2_100", 128), ("mobilenetv3_large_100", 512), ("mobilevit_s", 128), ("nfnet_l0", 128),
    ("repvgg_a2", 128), ("swin_base_patch4_window7_224", 128), ("tf_efficientnet_b0", 128), ("visformer_small", 128),
    ("vit_base_patch14_dinov2.lvd142m", 128), ("vit_base_patch16_siglip_256", 128),
)


def _hf_row(name: str, batch: int) -> ZooModel:
    cls, config = HUB_CONFIGS.get(name, (name, {}))
    if cls.startswith(("GPT2ForSequence", "GPTNeoForSequence", "GPTJForSequence", "Roberta")):
        config = {**config, "pad_token_id": 0}  # dynamo: "some models need a pad token defined to handle BS > 1"
    llm = "/" in name and not name.startswith("openai/whisper")
    inputs = "audio" if name.startswith("openai/whisper") else "zeros" if name.startswith("Roberta") else "ids"
    seq = LLM_PROMPT if llm else 128 if inputs == "audio" else _dynamo_seq(name)
    return ZooModel(name, "huggingface", "hf", cls, config, seq, batch, _hf_task(cls), inputs)


TV = "torchvision.models."
OWN = "TorchBench's own model code, not a pip-installable library"


def _tb(name: str, batch: int, builder: str = "", target: str = "", config: dict[str, Any] | None = None, task: str = "",
        inputs: str = "image", seq: int = 0, why: str = OWN) -> ZooModel:
    return ZooModel(name, "torchbench", builder, target, config or {}, seq, batch, task, inputs, "" if builder else why)


def _tb_hf(name: str, batch: int, cls: str, config: dict[str, Any], seq: int, inputs: str = "ids") -> ZooModel:
    return _tb(name, batch, "hf", cls, config, "features" if cls.startswith(("CLIP", "Whisper")) else _hf_task(cls), inputs, seq)


def _tv(name: str, batch: int) -> ZooModel:
    return _tb(name, batch, "tv", TV + name, {"weights": None}, "classifier")


def _timm_tb(name: str, batch: int, model: str) -> ZooModel:
    return _tb(name, batch, "timm", model, {}, "classifier")


DETECTRON = "detectron2 (not on PyPI: built from its git repository)"
T5_BASE = {"d_model": 768, "d_ff": 3072, "num_layers": 12, "num_decoder_layers": 12, "num_heads": 12, "d_kv": 64, "vocab_size": 32128}
T5_LARGE = {"d_model": 1024, "d_ff": 4096, "num_layers": 24, "num_decoder_layers": 24, "num_heads": 16, "d_kv": 64, "vocab_size": 32128}
# pytorch/benchmark's torchbenchmark/models, every directory, with its DEFAULT_EVAL_BSIZE
TORCHBENCH_LIST: tuple[ZooModel, ...] = (
    _tb("BERT_pytorch", 16), _tb("Background_Matting", 1), _tb("LearningToPaint", 96), _tb("Super_SloMo", 6),
    _tv("alexnet", 128),
    # TorchBench: Model(602 Reddit features, 64 hidden, 1 layer, 41 classes) on a Reddit subgraph; here a seeded random graph
    *(_tb(f"basic_gnn_{k}", 1, "pyg", f"torch_geometric.nn.{cls}", {"in_channels": 602, "hidden_channels": 64, "num_layers": 1,
                                                                    "out_channels": 41}, "classifier", "graph")
      for k, cls in (("edgecnn", "EdgeCNN"), ("gcn", "GCN"), ("gin", "GIN"), ("sage", "GraphSAGE"))),
    _tb("cm3leon_generate", 1, why="a generation loop over TorchBench's own model code"),
    _tb("dcgan", 256), _tb("demucs", 8), _tv("densenet121", 64),
    *(_tb(f"detectron2_{k}", 1, why=DETECTRON) for k in (
        "fasterrcnn_r_101_c4", "fasterrcnn_r_101_dc5", "fasterrcnn_r_101_fpn", "fasterrcnn_r_50_c4", "fasterrcnn_r_50_dc5",
        "fasterrcnn_r_50_fpn", "fcos_r_50_fpn", "maskrcnn", "maskrcnn_r_101_c4", "maskrcnn_r_101_fpn", "maskrcnn_r_50_c4",
        "maskrcnn_r_50_fpn")),
    _tb("dlrm", 2048),
    _tb("doctr_det_predictor", 1, why="needs python-doctr and its pretrained predictor (not declared by bti)"),
    _tb("doctr_reco_predictor", 1, why="needs python-doctr and its pretrained predictor (not declared by bti)"),
    _tb("drq", 1), _tb("fastNLP_Bert", 1), _tb("functorch_dp_cifar10", 64), _tb("functorch_maml_omniglot", 1),
    _tb_hf("hf_Albert", 1, "AlbertForMaskedLM", {"embedding_size": 128, "hidden_size": 768, "num_attention_heads": 12,
                                                 "intermediate_size": 3072}, 512),
    _tb_hf("hf_Bart", 1, "BartForConditionalGeneration", {"d_model": 768, "encoder_layers": 6, "decoder_layers": 6,
                                                           "encoder_attention_heads": 12, "decoder_attention_heads": 12,
                                                           "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072}, 512),
    _tb_hf("hf_Bert", 1, "BertForMaskedLM", {}, 512),
    # TorchBench's literal config (bert-large's own intermediate size is 4096; TorchBench leaves the default 3072)
    _tb_hf("hf_Bert_large", 1, "BertForMaskedLM", {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16}, 512),
    _tb_hf("hf_BigBird", 1, "BigBirdForMaskedLM", {"attention_type": "block_sparse"}, 4096 // 5),
    _tb_hf("hf_DistilBert", 1, "DistilBertForMaskedLM", {}, 512),
    _tb_hf("hf_GPT2", 1, "GPT2LMHeadModel", {}, 1024 // 4),
    _tb_hf("hf_GPT2_large", 1, "GPT2LMHeadModel", {"n_embd": 1280, "n_layer": 36, "n_head": 20}, 1024),
    _tb_hf("hf_Longformer", 1, "LongformerForMaskedLM", HUB_CONFIGS["AllenaiLongformerBase"][1], 4096 // 8),
    # TorchBench leaves hash_seed unset: the LSH attention then draws new rotations at every call and two runs of one
    # model differ (0.16 on ONNX Runtime), which no backend could match; seeded here, so the model is deterministic
    _tb_hf("hf_Reformer", 1, "ReformerForMaskedLM", {"num_buckets": 128, "is_decoder": False, "hash_seed": 0}, 4096 // 2),
    _tb_hf("hf_Roberta_base", 1, "XLMRobertaForMaskedLM", {"vocab_size": 250002, "max_position_embeddings": 514,
                                                           "type_vocab_size": 1, "pad_token_id": 1, "layer_norm_eps": 1e-5}, 512),
    _tb_hf("hf_T5", 1, "T5ForConditionalGeneration", T5_SMALL, 2048 // 4),
    _tb_hf("hf_T5_base", 1, "T5ForConditionalGeneration", T5_BASE, 2048),
    _tb("hf_T5_generate", 1, why="runs generate(), a decoding loop, not one program (hf_T5 is its forward pass)"),
    _tb_hf("hf_T5_large", 1, "T5ForConditionalGeneration", T5_LARGE, 512),
    _tb_hf("hf_Whisper", 8, "WhisperForAudioClassification", {}, 0, inputs="audio"),
    _tb_hf("hf_clip", 32, "CLIPModel", {}, 77, inputs="clip"),
    _tb_hf("hf_distil_whisper", 1, "WhisperForAudioClassification", {
        "d_model": 1024, "encoder_layers": 24, "decoder_layers": 2, "encoder_attention_heads": 16, "decoder_attention_heads": 16,
        "encoder_ffn_dim": 4096, "decoder_ffn_dim": 4096, "vocab_size": 51864}, 0, inputs="audio"),
    _tb("lennard_jones", 1000), _tb("llama", 32),
    _tb_hf("llama_v2_7b_16h", 1, "LlamaForCausalLM", {"num_hidden_layers": 16}, 512),
    _tb("llava", 1, why="a 13B multimodal checkpoint whose config TorchBench reads from the Hub (liuhaotian/llava-v1.5-13b)"),
    _tb("maml", 1), _tb("maml_omniglot", 5),
    _tb("microbench_unbacked_tolist_sum", 1), _tv("mnasnet1_0", 32), _tv("mobilenet_v2", 16),
    _tb("mobilenet_v2_quantized_qat", 96, why="TorchBench's FX quantization-aware training of torchvision's model "
        "(bti's quantized recipes quantize mobilenet_v2 themselves)"),
    _tv("mobilenet_v3_large", 32), _tb("moco", 32), _tb("modded_nanogpt", 1),
    _tb_hf("moondream", 1, "PhiForCausalLM", {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 24,
                                              "num_attention_heads": 32, "vocab_size": 51200, "partial_rotary_factor": 0.5}, 512),
    _tb("nanogpt", 1), _tb("nvidia_deeprecommender", 256), _tb("opacus_cifar10", 64), _tb("phlippe_densenet", 128),
    _tb("phlippe_resnet", 128), _tb("pyhpc_equation_of_state", 1048576), _tb("pyhpc_isoneutral_mixing", 1048576),
    _tb("pyhpc_turbulent_kinetic_energy", 1048576), _tb("pytorch_CycleGAN_and_pix2pix", 1), _tb("pytorch_stargan", 16),
    _tb("pytorch_unet", 1), _tv("resnet152", 32), _tv("resnet18", 8), _tv("resnet50", 32),
    _tb("resnet50_quantized_qat", 32, why="TorchBench's FX quantization-aware training of torchvision's model "
        "(bti's quantized recipes quantize resnet50 themselves)"),
    _tv("resnext50_32x4d", 8),
    _tb("sam", 32, why="segment-anything's model with TorchBench's checkpoint download (not declared by bti)"),
    _tb("sam_fast", 32, why="segment-anything-fast (not declared by bti)"),
    _tv("shufflenet_v2_x1_0", 64), _tb("simple_gpt", 1), _tb("simple_gpt_tp_manual", 1, why="tensor parallel over several GPUs"),
    _tb("soft_actor_critic", 256), _tb("speech_transformer", 1), _tv("squeezenet1_1", 16),
    _tb_hf("stable_diffusion_text_encoder", 1, "CLIPTextModel", {
        "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 23, "num_attention_heads": 16,
        "projection_dim": 512, "hidden_act": "gelu"}, 77),
    _tb("stable_diffusion_unet", 1, why="needs diffusers (not declared by bti)"),
    _tb("tacotron2", 64),
    _tb("timm_efficientdet", 128, why="needs effdet (not declared by bti)"),
    _timm_tb("timm_efficientnet", 64, "efficientnet_b0"), _timm_tb("timm_nfnet", 128, "dm_nfnet_f0"),
    _timm_tb("timm_regnet", 32, "regnety_120"), _timm_tb("timm_resnest", 32, "resnest14d"),
    _timm_tb("timm_vision_transformer", 32, "vit_small_patch16_224"),
    _timm_tb("timm_vision_transformer_large", 32, "vit_giant_patch14_224"), _timm_tb("timm_vovnet", 32, "vovnet39a"),
    _tb("torch_multimodal_clip", 32, why="needs torchmultimodal (not on PyPI for this torch)"),
    _tb("tts_angular", 64), _tv("vgg16", 4),
    _tb("vision_maskrcnn", 1, "tv-detection", TV + "detection.maskrcnn_resnet50_fpn", {"weights": None, "weights_backbone": None},
        "detection", "images"),
    _tb("yolov3", 8),
)
MODELS: tuple[ZooModel, ...] = (
    *(_hf_row(n, b) for n, b in HF_LIST),
    *(ZooModel(n, "timm", "timm", n, {}, 0, b, "classifier", "image") for n, b in TIMM_LIST),
    *TORCHBENCH_LIST,
)
CI_SAMPLE = ("zoo.huggingface.ElectraForQuestionAnswering", "zoo.timm.mobilenetv2_100", "zoo.torchbench.resnet18")
ESTIMATE_CAP = 600.0  # seconds: the default item timeout
BASE_RECIPES = ("torch-cpu", "xnnpack")  # a row's base figure (``seconds``): its mean item duration on these
FACTOR_ROWS = 3  # rows a recipe must be measured on (``recipe_seconds``) before its factor estimates the others
TIMEOUT_S = (600.0, 10.0, 3600.0)  # a row's item timeout (``timeout_s``): 10 s per unit of work, within these bounds
TIMEOUT_MARGIN = 3.0  # a row's timeout on one recipe (``timeouts``): at least 3 times its seconds there, at most an hour


def sizes() -> dict[str, dict[str, Any]]:
    try:
        return dict(json.loads(SIZES.read_text()))
    except (OSError, ValueError):
        return {}


def memory_gb(params: float, outputs: float = 0.0, factor: tuple[float, float] = MEMORY_FACTOR) -> float:
    """The memory a worker is declared to need for a model of ``params`` parameters and ``outputs`` output elements
    (fp32)."""
    return round(MEMORY_BASE_GB + (params * factor[0] + outputs * factor[1]) * 4 / 2**30, 1)


def _cost(m: ZooModel, size: dict[str, Any]) -> float:
    """Seconds per item, the row's base figure: measured (``seconds``, the mean item duration of the first sweep, on the
    eager and XNNPACK recipes of a 2-core CPU), else an estimate from the parameter count and input size, at most
    ``ESTIMATE_CAP`` (an estimate for balancing shards: most rows end well inside the default timeout, or SKIP at once
    by their declared memory); a row that cannot be built costs nothing. Per recipe: ``_recipe_costs``. A previous run's
    durations (``bti run --durations``) replace all of it."""
    if m.unavailable:
        return 0.1
    seconds = seconds_or_none(size.get("seconds"))
    return seconds if seconds is not None else min(ESTIMATE_CAP, round(10 + 0.4 * _work(m, size), 1))


def recipe_factors(known: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Each recipe's measured seconds per item against the rows' measured ``seconds`` (the eager and XNNPACK recipes'):
    the sum over the rows measured on both against the sum of their bases, for recipes measured on ``FACTOR_ROWS`` rows
    or more. The portable kernels and the TOSA reference model take tens of times longer, a recipe that only lowers
    less. A ratio of sums, not a median, so the large rows, which make a shard long, weigh most; the items that failed
    before running are not measured (``measured_costs``)."""
    pairs: dict[str, list[tuple[float, float]]] = {}  # recipe -> (its seconds, the row's base) per row measured on both
    for entry in known.values():
        base = seconds_or_none(entry.get("seconds"))
        for recipe, value in (entry.get("recipe_seconds") or {}).items():
            seconds = seconds_or_none(value)
            if base and seconds is not None:
                pairs.setdefault(recipe, []).append((seconds, base))
    return {r: round(sum(s for s, _ in v) / sum(b for _, b in v), 3) for r, v in sorted(pairs.items()) if len(v) >= FACTOR_ROWS}


def _recipe_costs(m: ZooModel, size: dict[str, Any], factors: dict[str, float]) -> dict[str, float]:
    """Seconds per item on each recipe bti has a figure for: measured on this row (``recipe_seconds``), else, where the
    row's base is measured (a factor is a ratio of measurements), the base times the recipe's factor. A row never
    measured (those that SKIP for their declared memory on the machines measured) keeps its estimate on every recipe: a
    factor on it would add phantom hours. Not yet bounded by the timeouts (``_recipe_timeouts``), which end an item."""
    if m.unavailable:
        return {}
    measured = {r: v for r, v in ((r, seconds_or_none(x)) for r, x in (size.get("recipe_seconds") or {}).items()) if v is not None}
    base = seconds_or_none(size.get("seconds"))
    scaled = {r: round(base * f, 1) for r, f in factors.items()} if base is not None else {}
    return {r: measured.get(r, scaled.get(r, 0.0)) for r in sorted({*measured, *scaled})}


def _recipe_timeouts(row_timeout: float, seconds: dict[str, float]) -> dict[str, float]:
    """The row's timeout on each recipe whose seconds there (``_recipe_costs``) leave less than ``TIMEOUT_MARGIN`` times
    them under the row's own: ELECTRA's QA took 287 s alone on the TOSA reference model against the row's 600 s, and
    timed out beside three other processes; the portable kernels take twenty times XNNPACK's. A recipe measured fast
    keeps the row's timeout, so a hang there still ends as soon; none passes the row's bound of an hour, and a recipe
    whose seconds reach that bound (ALBERT's estimates on the Arm recipes) keeps the row's: it would time out anyway,
    an hour later. Less than a tenth more than the row's is not worth a second figure."""
    high = TIMEOUT_S[2]  # a row's own timeout is within it (``_timeout``)
    out = {r: float(min(high, round(TIMEOUT_MARGIN * s))) for r, s in seconds.items() if s < high}
    return {r: t for r, t in out.items() if t > 1.1 * row_timeout}


def _work(m: ZooModel, size: dict[str, Any]) -> float:
    """Millions of parameters times the input's size against BERT's 512 tokens or a 224-pixel image; an audio row's
    frames (Whisper's 3,000) are half as many tokens after its strided convolution, not an image's side."""
    side = (size.get("input") or [3, 224, 224])[-1]
    scale = m.seq / 512 if m.seq else side / 2 / 512 if m.inputs == "audio" else (side / 224) ** 2  # audio: Whisper's stride 2
    return float(size.get("params", 0)) / 1e6 * scale


def _timeout(m: ZooModel, size: dict[str, Any]) -> float:
    """The row's own item timeout: the slowest backends here take about 3 s a call per unit of work (BERT-large,
    285 units: 821 s a call on the portable kernels; DINOv2's ViT-B/14, 460 units: 1,275 s in all on the TOSA
    reference model), and an item makes two calls at most (``harness.metrics.LONG_CALL_S``), so 10 s a unit, at least
    the default 600 s and at most an hour: a hang on a small row still ends in 10 minutes."""
    low, per_unit, high = TIMEOUT_S
    return float(min(high, max(low, round(per_unit * _work(m, size)))))


def zoo_cases(suite: str = "zoo", lists: tuple[str, ...] = LISTS, only: tuple[str, ...] = ()) -> list[Case]:
    code = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    known = sizes()
    factors = recipe_factors(known)
    cases = []
    for m in MODELS:
        if m.list not in lists or (only and m.id not in only):
            continue
        size = known.get(m.id, {})
        spec: dict[str, Any] = {"model": m.name, "list": m.list, "batch": 1, "list_batch": m.batch, "task": m.task, "code": code,
                                "check": _check(m), "cost": _cost(m, size), "timeout_s": _timeout(m, size)}
        seconds = _recipe_costs(m, size, factors)
        timeouts = _recipe_timeouts(spec["timeout_s"], seconds)
        if timeouts:
            spec["timeouts"] = timeouts  # recipe -> seconds, where longer than timeout_s (harness.settings.case_timeout)
        costs = {r: min(timeouts.get(r, spec["timeout_s"]), v) for r, v in seconds.items()}  # a timeout ends an item
        if costs:
            spec["costs"] = costs  # per recipe, for shard balance (harness.suites.case_cost)
        if m.seq:
            spec["seq"] = m.seq
        if m.unavailable:
            spec["unavailable"] = f"{m.name}: {m.unavailable}"
        else:
            spec["requires"] = list(BUILDERS[m.builder].requires)
        if size.get("params"):
            spec["params"] = int(size["params"])
            params, outputs = float(size["params"]), float(size.get("outputs", 0))
            spec["memory_gb"] = memory_gb(params, outputs)
            if size.get("floors"):
                spec["memory_floors"] = dict(size["floors"])  # "recipe@executorch release" -> GB, measured
            spec["memory_gb_without_export"] = memory_gb(params, outputs, EAGER_FACTOR)  # eager and compiled backends
        cases.append(Case(id=m.id, suite=suite, kind="zoo", op=None, tags=("zoo", m.list, *([m.task] if m.task else []), REPRO_ON_REQUEST),
                          spec=spec, dtypes=("float32",), shapes=("static",), source=m.target or f"torchbench:{m.name}"))
    return cases


def _check(m: ZooModel) -> str:
    extra = {"lm": "token agreement", "classifier": "top-1 agreement"}.get(m.task, "")
    return "; ".join(filter(None, ["element-wise (dynamo's rule on eager and compiled recipes)", extra]))


def ci_cases() -> list[Case]:
    return zoo_cases("models-ci", only=CI_SAMPLE)


def list_cases(name: str) -> list[Case]:
    return zoo_cases(f"zoo-{name}", lists=(name,))


# ---------------------------------------------------------------- worker side


def measure_sizes(models: tuple[ZooModel, ...] = MODELS) -> dict[str, dict[str, Any]]:
    """Each buildable model's parameter count and input size, built on the meta device (no memory, no weights)."""
    import torch

    out: dict[str, dict[str, Any]] = {}
    for m in models:
        if m.unavailable:
            continue
        builder = BUILDERS[m.builder]
        with torch.device("meta"):
            model = builder.model(m)
        out[m.id] = {"params": sum(p.numel() for p in model.parameters()), "input": builder.input_size(m, model)}
        if m.task == "lm":  # the logits: a value per position and vocabulary entry
            out[m.id]["outputs"] = m.seq * vocab(model.config)
        del model
    return out


EXPECTED = HERE / "zoo_expected.yaml"



@functools.cache
def _expected() -> tuple[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], Any], ...]:
    """(recipe globs, backends, recipe globs excepted, rule) per entry of ``zoo_expected.yaml``, parsed as recipe xfail
    rules."""
    from harness.cases.yamlload import load_yaml
    from harness.errors import SpecError
    from harness.recipes import parse_rules

    raw = load_yaml(EXPECTED) or []
    out = []

    def names(entry: dict[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = entry.pop(key, None)
        if value is None:
            return default
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SpecError(f"{EXPECTED}: the rule for {entry.get('match')!r}: `{key}` must be a list of names or globs")
        return tuple(value)

    for entry in raw:
        recipes, backends = names(entry, "recipes", ("*",)), names(entry, "backends", ())
        excepted = names(entry, "except_recipes", ())
        (rule,) = parse_rules([entry], str(EXPECTED), "xfail")
        out.append((recipes, backends, excepted, rule))
    return tuple(out)


def zoo_id(case: Case) -> str:
    """The zoo row a case runs: its own id, or the row an alias stands for (``hf-models-full``'s ``spec["zoo"]``)."""
    return str(case.spec.get("zoo", case.id))


def _row(case: Case) -> ZooModel:
    want = zoo_id(case)
    return next(x for x in MODELS if x.id == want)


def judge(case: Case, dtype: str, recipe: Any) -> Judgement:
    """The known failures of ``case`` on ``recipe`` (by name and backend); the runner holds the item to them. An
    alias is judged as the row it stands for."""
    import fnmatch

    rules = tuple(rule for recipes, backends, excepted, rule in _expected()
                  if any(fnmatch.fnmatchcase(recipe.name, r) for r in recipes) and (not backends or recipe.backend in backends)
                  and not any(fnmatch.fnmatchcase(recipe.name, r) for r in excepted)
                  and any(fnmatch.fnmatchcase(f"{zoo_id(case)}[{dtype},{shape}]", rule.match) for shape in ("static", "dynamic")))
    if case.id != zoo_id(case):  # an alias: the row's rules, matched on the alias's own items
        rules = tuple(dataclasses.replace(r, match=glob.escape(case.id) + "[[]*") for r in rules)
    return Judgement(rules=rules)


def build(case: Case, axes: Any, seed: int) -> Any:
    import torch

    from harness.cases.contract import Built

    m = _row(case)
    builder = BUILDERS[m.builder]
    torch.manual_seed(seed)
    model = builder.model(m).eval()
    inputs = builder.inputs(m, model, torch.Generator().manual_seed(seed))
    module = builder.wrap(model, m).eval()
    estimate_batch_norm(module, builder.calibration(m, model, torch.Generator().manual_seed(seed + 1)))
    return Built(module, inputs, inputs, None, task=m.task if m.task in ("lm", "classifier") else None)


def _a_cost(status: Status) -> bool:
    """Whether an item's time says what its row costs on its recipe: not if it never ran (but a program lowered for a
    runtime this machine lacks: the lowering is its cost), nor if it failed before its program ran."""
    return status.attempted and not status.failed_before_run


def measured_costs(results: Path) -> dict[str, dict[str, float]]:
    """Each zoo case's mean item duration (seconds) per recipe in a results file, over the items that ran (a TIMEOUT or
    an out-of-memory kill took its time too). An item that failed before its program ran (export, quantize, lower,
    serialize, load) says little of what the row costs there once fixed, and would pull the recipe's factor down: it
    is left out, and the row takes the factor's estimate."""
    from harness.results import read_latest

    per: dict[tuple[str, str], list[float]] = {}
    known = {s.value for s in Status}
    for rec in read_latest(results)[1]:
        case, recipe, seconds = str(rec.get("case") or ""), rec.get("recipe"), seconds_or_none(rec.get("duration_s"))
        status = str((rec.get("xfail") or {}).get("status") or rec.get("status"))  # an expected failure: the one expected
        if case.startswith("zoo.") and recipe and seconds is not None and status in known and _a_cost(Status(status)):
            per.setdefault((case, str(recipe)), []).append(seconds)
    costs: dict[str, dict[str, float]] = {}
    for (case, recipe), v in sorted(per.items()):
        costs.setdefault(case, {})[recipe] = round(sum(v) / len(v), 1)
    return costs


_OUT_OF_MEMORY = re.compile(r"^out of memory: the worker's RSS reached ([0-9.]+) GB, above the worker memory limit of ([0-9.]+) GB")


def measured_peaks(results: Path) -> dict[str, dict[str, float]]:
    """Each zoo case's memory floors from a results file, per recipe and version pair (named by its executorch
    release, as the matrix is: an eager recipe's kill on torch 2.13 is "torch-cpu@1.4"): where its worker was killed
    out of memory, more than the limit it passed (the pool rounds the RSS it reached to
    0.1 GB, so a kill "at 9.0 GB, above the limit of 9.0 GB" declares 9.1). A lower bound on what the row needs there."""
    from harness.results import read_latest
    from harness.versions import release

    header, records = read_latest(results)
    executorch = ((header or {}).get("versions") or {}).get("executorch")
    peaks: dict[str, dict[str, float]] = {}
    for rec in records:
        case, found = str(rec.get("case") or ""), _OUT_OF_MEMORY.match(str(rec.get("detail") or ""))
        if case.startswith("zoo.") and found and rec.get("status") == "CRASH":
            key, gb = f"{rec.get('recipe')}@{release(executorch)}", round(max(map(float, found.groups())) + 0.1, 1)
            per = peaks.setdefault(case, {})
            per[key] = max(per.get(key, 0.0), gb)
    return peaks


def main(argv: list[str]) -> int:
    """``python -m harness.suites.zoo --sizes [--costs RESULTS.jsonl ...] [--peaks RESULTS.jsonl ...]``: measure every
    buildable model on the meta device, add each case's measured seconds per item on each recipe from sweeps' results
    (``recipe_seconds``: kept, a later sweep's replacing an earlier's) and its memory floors from sweeps' out-of-memory
    kills (kept, and raised), rewrite ``zoo_sizes.json`` and print the zoo's size. A row's ``seconds``, the first
    sweep's mean on the eager and XNNPACK recipes, is the base the recipes' factors are measured against: kept, and
    set where missing from the row's figures on those recipes (``BASE_RECIPES``). The figures are not per version pair:
    the last sweep given wins."""
    parser = argparse.ArgumentParser(prog="python -m harness.suites.zoo")
    parser.add_argument("--sizes", action="store_true", required=True, help="measure and rewrite zoo_sizes.json")
    parser.add_argument("--costs", type=Path, metavar="RESULTS.jsonl", action="append", default=[],
                        help="a sweep's results: each model's seconds per item on each recipe (repeatable)")
    parser.add_argument("--peaks", type=Path, metavar="RESULTS.jsonl", action="append", default=[],
                        help="a sweep's results: the RSS each model's worker reached when killed out of memory (repeatable)")
    args = parser.parse_args(argv)  # a bad command line: usage and exit 2
    old = sizes()
    try:
        costs = [measured_costs(p) for p in args.costs]
        peaks = [measured_peaks(p) for p in args.peaks]
    except UserError as exc:  # an unreadable results file: one line, and the sizes file untouched
        print(f"python -m harness.suites.zoo: {exc}", file=sys.stderr)
        return 2
    measured = measure_sizes()
    for key, entry in measured.items():
        per_recipe = dict(old.get(key, {}).get("recipe_seconds") or {})
        for c in costs:
            per_recipe.update(c.get(key, {}))
        if per_recipe:
            entry["recipe_seconds"] = dict(sorted(per_recipe.items()))
        base = [v for v in (seconds_or_none(per_recipe.get(r)) for r in BASE_RECIPES) if v is not None]
        seconds = old.get(key, {}).get("seconds", round(sum(base) / len(base), 1) if base else None)
        if seconds is not None:  # the base figure: kept, else first measured on the eager and XNNPACK recipes
            entry["seconds"] = seconds
        floors = dict(old.get(key, {}).get("floors") or {})  # kept, and only raised by evidence
        for where, gb in (kv for p in peaks for kv in p.get(key, {}).items()):
            floors[where] = max(gb, floors.get(where, 0.0))
        if floors:
            entry["floors"] = dict(sorted(floors.items()))
    lines = [f"  {json.dumps(k)}: {json.dumps(measured[k])}" for k in sorted(measured)]
    SIZES.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    total = sum(v["params"] for v in measured.values())
    timed = sum("seconds" in v for v in measured.values())
    pairs = sum(len(v.get("recipe_seconds", {})) for v in measured.values())
    print(f"{len(MODELS)} rows, {len(measured)} buildable models, {total / 1e9:.2f} B parameters, {timed} with measured "
          f"seconds, {pairs} measured (row, recipe) costs -> {SIZES}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
