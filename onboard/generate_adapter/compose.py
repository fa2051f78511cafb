"""Compose an adapter from the ModelProfile alone: inspect's layer plan and features, the tensor roles
(onboard/names/tensors.py), config values read at run time (config_values.py).

`compose(profile)` returns an AdapterPlan: the AdapterSpec templates/adapter.py.j2 renders, the inferred weight map,
and a kernel stub for each part the block library cannot express. An adapter with stubs refuses to run: never a
runnable copy of the closest family. Runtime names are canonical (`self_attn.qkv_proj`, `mlp.gate_up_proj`, ...):
the weight map renames the checkpoint's tensors to them, so one template serves every naming scheme. The parts live
in compose_*.py (attention options, MoE, norms, mixers, Mamba, layer plan, head); compose_rules.py holds the rules.
"""

from __future__ import annotations

import re

from onboard.errors import InputError
from onboard.generate_adapter.adapter_spec import BASE_FIELDS, AdapterSpec, attention
from onboard.generate_adapter.compose_attention import attention_options
from onboard.generate_adapter.compose_head import embedding_projections, lm_head_options, per_layer_inputs
from onboard.generate_adapter.compose_knowledge import GATED_ACTIVATION_NAMES, PLAIN_ACTIVATION_NAMES
from onboard.generate_adapter.compose_layer_kv import KVLayout, layer_kv
from onboard.generate_adapter.compose_layers import ATTENDING, layer_plan
from onboard.generate_adapter.compose_mixers import (
    FEED_FORWARD_LAYER_TYPES,
    LAYER_TYPE_NAMES,
    layer_mixers,
    mla_expression,
    parallel_mamba,
)
from onboard.generate_adapter.compose_moe import moe_beside, moe_expression
from onboard.generate_adapter.compose_norms import input_norm, norms, sub_norm
from onboard.generate_adapter.compose_rules import (
    AdapterPlan,
    ComposerState,
    config_key_stubs,
    embedding_scale,
    guard_statements,
    op_name,
    pattern_expr,
    read_keys,
    single_block_layers,
)
from onboard.generate_adapter.weight_inference import (
    AmbiguousWeights,
    Found,
    layer_target,
    templates,
)
from onboard.names.config import spellings
from onboard.names.tensors import LAYER_NAME
from onboard.profile import ModelProfile

PLACEHOLDER_ATTENTION = attention()
# AdapterSpec fields the composer holds under the same name
SPEC_ATTRIBUTES = "rotary_head_dim positions embed_norm final_norm embed_width side_mixer mlp_reads_residual".split()
PLACEHOLDER_MLP = "GatedMLP(args.hidden_size, args.intermediate_size, args.hidden_act)"


class Composer(ComposerState):
    layer_kv: KVLayout
    """How layers differ in their keys and values (compose_layer_kv: Gemma 4), set first by `run`."""

    def run(self) -> AdapterPlan:
        p = self.p
        self.fields.need("tie_word_embeddings", "bool", repr(p.tie_word_embeddings))
        self.eps()  # the norm's default eps (LayerNorm 1e-5, RMSNorm 1e-6) before BASE_FIELDS' RMS default
        if p.layers and all(layer.mlp == "moe" for layer in p.layers) or p.dims.intermediate_size is None:
            self.fields.need("intermediate_size", "int | None", "None")  # no dense MLP reads it (or not by this name)
        if not any(layer.attention in ATTENDING for layer in p.layers):  # Mamba: no attention, so no heads to read
            self.fields.need("num_attention_heads", "int | None", "None")
        for name, annotation, default in BASE_FIELDS:  # every adapter has them
            self.fields.need(name, annotation, default)
        ignored = self.facts.get("ignored_keys", ())
        if any(key in p.config_keys for key in ignored):  # type: ignore[union-attr]
            self.fact("ignored_keys")
        self.acknowledged.update(ignored)  # type: ignore[arg-type]
        for op, reason in self.facts.get("stubs", ()):  # type: ignore[attr-defined]
            self.stub(op, reason)  # stubs are reported as stubs, not as facts applied
        self.unconsumed_tensor_stubs(self.roles.unknown)
        self.layer_kv = layer_kv(self)
        ple_model, ple_layer = per_layer_inputs(self)
        attn = self.attention()
        mlp, moe_layer = self.feed_forward()
        norm, placement, norm_names = norms(self)
        residual_fp32, mixer_scales = None, "(1.0, 1.0, 1.0)"
        if self.side_mixer and placement != "pre":
            self.stub(
                "parallel_ssm",
                f"a Mamba mixer beside attention in a {placement}-norm layer is not a placement of the block library",
            )
        elif self.side_mixer:
            placement = "parallel_ssm"
            scales = [
                self.fields.need(key, "float", "1.0") if self.has_key(key) else "1.0"
                for key in ("attention_in_multiplier", "attention_out_multiplier", "ssm_out_multiplier")
            ]
            mixer_scales = f"({', '.join(scales)})"
        if placement == "single" and self.has_key("residual_in_fp32"):
            residual_fp32 = self.fields.need("residual_in_fp32", "bool", "False")
        layer_type, rope_kind = layer_plan(self)
        embed_scale = self.embeddings()
        lm_head = lm_head_options(self)
        residual = self.residual(placement)
        if p.mtp_layers or self.has_key("num_nextn_predict_layers"):  # stored past the last layer: dropped
            self.fields.need("num_nextn_predict_layers", "int", "0")
        if self.wm.partial:  # visible in the summary: a converter that lost a layer's bias looks the same
            self.words.append("biases some layers lack, zero there: " + ", ".join(self.wm.partial))
        self.post_init += guard_statements(p, self.fields, self.guard_tests, frozenset(self.acknowledged))
        reads = read_keys(self.fields, self.extra_aliases, self.acknowledged)
        self.stubs += config_key_stubs(p, reads)
        spec = AdapterSpec(
            model_type=p.model_type,
            summary="composed from the checkpoint's profile: " + ", ".join(self.words),
            attention=attn,
            mlp=mlp,
            norm=norm,
            placement=placement,
            norm_names=norm_names,
            fields=tuple(self.fields.items.values()),
            aliases=self.extra_aliases,
            layer_type=layer_type,
            moe_layer=moe_layer,
            rope_kind=rope_kind,
            embed_scale=embed_scale,
            lm_head=tuple(lm_head),
            residual_scale=residual,
            residual_fp32=residual_fp32,
            post_init=tuple(self.post_init),
            dropped=tuple(self.roles.dropped),
            mixer_scales=mixer_scales,
            per_layer_args=self.layer_kv.per_layer_args,
            input_norm=input_norm(self),
            norm_exprs=tuple(self.norm_exprs.items()),
            kv_source=self.layer_kv.kv_source,
            layer_scalar=self.layer_kv.layer_scalar,
            per_layer_inputs=ple_model,
            layer_gate=ple_layer,
            **{name: getattr(self, name) for name in SPEC_ATTRIBUTES},
        )
        unique = {s.op: s for s in reversed(self.stubs)}
        stubs = tuple(sorted(unique.values(), key=lambda s: s.op))
        return AdapterPlan(
            p.model_type, spec, tuple(self.wm.rules), stubs, p.closest_family, tuple(self.used_facts), reads
        )

    def unconsumed_tensor_stubs(self, tensor_templates: list[str]) -> None:
        """A stub per module whose tensors no block reads, named after the module."""
        grouped: dict[str, list[str]] = {}
        for template in tensor_templates:
            layer = LAYER_NAME.fullmatch(template)
            name = layer.group("rest") if layer else template.removeprefix("model.").removeprefix("transformer.")
            module = re.sub(r"\.(weight|bias)$", "", name.replace("{}.", ""))
            grouped.setdefault(op_name(module), []).append(template)
        for op, names in grouped.items():
            self.stub(op, f"checkpoint tensors no block consumes: {', '.join(sorted(names))}")

    def attention(self) -> str:
        """The token mixer's expression: attention, or per layer type another mixer (compose_mixers)."""
        mixers = layer_mixers(self)
        self.mixers = dict(mixers)
        self.stubs = [stub for stub in self.stubs if stub.op not in {f"{kind}_layers" for kind, _ in mixers}]
        expr = None if all(layer.attention in dict(mixers) for layer in self.p.layers) else self.self_attention()
        for kind, mixer in reversed(mixers):  # the layer types' names in config.json's layer_types
            expr = mixer if expr is None else f'{mixer} if layer_type == "{LAYER_TYPE_NAMES[kind]}" else {expr}'
        # Falcon-H1: a Mamba-2 mixer beside the layer's attention (Zamba's hybrids, whose attention is a shared block
        # the layers take turns with, are not that: no attention of their own is recognised, the stub stands)
        attends = not any(stub.op == "attention_projections" for stub in self.stubs)
        side = parallel_mamba(self) if attends else ""
        if side:
            self.side_mixer = side
            self.stubs = [stub for stub in self.stubs if stub.op != "parallel_ssm"]
            self.words[-1] = "a Mamba-2 mixer beside attention in every layer"
        if single_block_layers(self.p) and any(layer.attention == "none" for layer in self.p.layers):
            ffn = ", ".join(f'"{name}"' for name in FEED_FORWARD_LAYER_TYPES.values())
            expr = f"None if layer_type in ({ffn}) else {expr}"  # a feed-forward layer (Nemotron-H)
        g_gate = self.roles.get("attn.g_gate")  # read only by softmax attention's options: MLA, linear mixers do not
        if g_gate is not None and not self.wm.reads(g_gate.source):
            self.unconsumed_tensor_stubs([g_gate.template])
        return expr  # type: ignore[return-value]

    def self_attention(self) -> str:
        r, d = self.roles, self.p.dims
        if r.has("mla"):
            return mla_expression(self)
        q, k, v, o = r.get("attn.q"), r.get("attn.k"), r.get("attn.v"), r.get("attn.o")
        qkv, grouped = r.get("attn.qkv"), r.get("attn.qkv_grouped")
        forms = [f for f in ((q and k and v and q), qkv, grouped) if f]
        if len(forms) > 1:
            raise AmbiguousWeights(
                f"both separate and fused q/k/v projections: {templates(q, k, v, qkv, grouped)}",
                "add a family fact (compose_knowledge.FAMILY_FACTS) naming the ones the attention reads",
            )
        if (q or k or v) and not (q and k and v):
            self.stub("attention_projections", f"q/k/v projections incomplete: only {templates(q, k, v)}")
        if not forms or o is None:
            self.stub("attention_projections", "no attention q/k/v/o projections recognised in the checkpoint")
            return PLACEHOLDER_ATTENTION
        h, kv, hd, hidden = d.num_attention_heads, d.num_kv_heads, d.head_dim, d.hidden_size
        dv = self.value_head_dim(v, o)
        target = layer_target("self_attn.qkv_proj")
        self.wm.fused_conv1d_first([qkv, o], [(h * hd + kv * (hd + dv), hidden), (hidden, h * dv)])
        gated = q is not None and q.shape[:1] == (2 * h * hd,) and o.shape[-1:] == (h * hd,)
        if q is not None:
            # cat_present: layers whose keys are their values, or that read another layer's, store fewer parts
            op = "cat_present" if self.layer_kv.partial_kv else "cat"
            self.wm.add(f"{target}.weight", (q.source, k.source, v.source), op)  # type: ignore[union-attr]
            biases = [r.get(role, "bias") for role in ("attn.q", "attn.k", "attn.v")]
            qkv_bias = all(biases)
            if any(biases) and not qkv_bias:
                self.stub("qkv_partial_bias", f"bias on some of q/k/v only: {templates(*biases)}")
            if qkv_bias:
                self.wm.add(f"{target}.bias", tuple(b.source for b in biases if b), "cat")
            self.words.append("separate q/k/v fused at load")
        elif qkv is not None and self.fact("qkv_layout") == "codegen":
            self.wm.add(f"{target}.weight", (qkv.source,), "codegen_qkv")
            bias = r.get("attn.qkv", "bias")
            if bias is not None:
                self.wm.add(f"{target}.bias", (bias.source,), "codegen_qkv")
            qkv_bias = bias is not None
            self.words.append("fused qkv in CodeGen's 4 blocks of [q, v, k]")
        elif qkv is not None:
            self.wm.linear(target, qkv, h * hd + kv * (hd + dv), hidden)
            qkv_bias = self.wm.bias(target, r.get("attn.qkv", "bias"))
            self.words.append("fused qkv")
        else:
            qkv_bias = self.query_key_value(target, grouped)  # type: ignore[arg-type]
        self.wm.linear(layer_target("self_attn.o_proj"), o, hidden, h * dv)
        o_bias = self.wm.bias(layer_target("self_attn.o_proj"), r.get("attn.o", "bias"))
        qkv_sources = (q.source, k.source, v.source) if q is not None else ()  # type: ignore[union-attr]
        qkv_rules = [(f"{target}.bias", qkv_sources, "cat")] if qkv_sources else []
        o_target = layer_target("self_attn.o_proj.bias")
        kw = [
            f"qkv_bias={self.switched_bias('qkv', qkv_bias, qkv_rules)}",
            f"o_bias={self.switched_bias('o', o_bias, [(o_target, (o.source,), 'copy')])}",
        ]
        if gated:  # q_proj twice the query size ([q_h; g_h] per head), o_proj reads the query size: a gated output
            kw.append("output_gate=True")
            self.words.append("sigmoid output gate from the query projection")
        if dv != hd:
            size = self.fields.need("v_head_dim", "int", None) if self.has_key("v_head_dim") else str(dv)
            kw.append(f"v_head_dim={size}")
            self.words.append(f"values of {dv} dims (queries and keys {hd})")
        if self.has_key("attention_value_scale"):  # MiMo-V2-Flash: values scaled after their projection
            kw.append(f"v_scale={self.fields.need('attention_value_scale', 'float | None', 'None')}")
            self.words.append("scaled values")
        kw += attention_options(self) + self.layer_kv.attention_options()
        # per_layer_config: each layer's args carry its own KV heads and head size
        kv_heads = "args.num_key_value_heads" if self.layer_kv.per_layer_args else self.kv_heads_expression(hd + dv)
        heads = "args.num_attention_heads"
        if self.has_key("num_attention_heads_per_layer"):  # Laguna: each layer its own query heads (the shapes agree)
            per_layer = self.fields.need("num_attention_heads_per_layer", "list[int] | None", "None")
            heads = f"{per_layer}[i] if {per_layer} else args.num_attention_heads"
            self.words.append("query heads per layer")
        return attention(*kw, kv_heads=kv_heads, heads=heads)

    def value_head_dim(self, v: Found | None, o: Found) -> int:
        """Per-head value width: what o_proj reads per query head (the query width unless the values differ)."""
        d = self.p.dims
        reads = o.shape[-1] if len(o.shape) == 2 and o.shape[0] == d.hidden_size else o.shape[0] if o.shape else 0
        if reads and reads % d.num_attention_heads == 0 and reads != d.num_attention_heads * d.head_dim:
            return reads // d.num_attention_heads
        return d.head_dim

    def kv_heads_expression(self, kv_width_per_head: int) -> str:
        """num_key_value_heads, or an expression of the layer type where the layers' K/V widths show other head
        counts on sliding and full layers (MiMo-V2-Flash's sliding layers: twice the KV heads)."""
        base, d = "args.num_key_value_heads", self.p.dims
        heads: dict[str, set[int]] = {}
        for layer in self.p.layers:
            if layer.kv_width is not None:
                heads.setdefault(layer.attention, set()).add(layer.kv_width // kv_width_per_head)
        if all(counts == {d.num_kv_heads} for counts in heads.values()):
            return base
        one_per_type = all(len(c) == 1 for c in heads.values()) and not set(heads) - {"sliding", "full"}
        if not (one_per_type and d.num_kv_heads and all(next(iter(c)) % d.num_kv_heads == 0 for c in heads.values())):
            self.stub(
                "kv_heads_per_layer",
                "layers with different KV head counts, not one count per sliding / full "
                f"layer type: {sorted((k, sorted(v)) for k, v in heads.items())}",
            )
            return base
        ratio = {kind: next(iter(c)) // d.num_kv_heads for kind, c in heads.items()}
        self.words.append(", ".join(f"{kind} layers {r}x the KV heads" for kind, r in ratio.items() if r != 1))
        sliding, full = ratio.get("sliding", 1), ratio.get("full", 1)
        scaled = {r: base if r == 1 else f"{base} * {r}" for r in (sliding, full)}
        return f"{scaled[sliding]} if layer_type == SLIDING else {scaled[full]}"

    def query_key_value(self, target: str, fused: Found) -> bool:
        """`query_key_value`: rows grouped per KV head (GPT-NeoX, Falcon, Bloom) or [q; k; v] (Sarvam, ChatGLM)."""
        layout = self.fact("query_key_value")
        if layout is None and self.p.dims.num_kv_heads != 1:
            raise AmbiguousWeights(
                f"{fused.template}: rows grouped per KV head ([q heads of the group; k; v], GPT-NeoX / Falcon) or "
                "[all q; all k; all v] (ChatGLM / Sarvam)? With more than one KV head the shapes cannot tell",
                "add the family to compose_knowledge.FAMILY_FACTS with query_key_value: grouped | concat",
            )
        op = "deinterleave_heads" if layout == "grouped" else "copy"
        self.wm.add(f"{target}.weight", (fused.source,), op)
        bias = self.roles.get("attn.qkv_grouped", "bias")
        if bias is not None:
            self.wm.add(f"{target}.bias", (bias.source,), op)
        self.words.append("query_key_value " + ("grouped per KV head" if op != "copy" else "fused [q; k; v]"))
        return bias is not None

    def feed_forward(self) -> tuple[str, str | None]:
        layers = self.p.layers
        single = single_block_layers(self.p)  # a layer without a feed-forward block has a token mixer instead
        if single:  # each feed-forward kind on the layers of its type, none on the mixer layers
            expr = "None"
            if any(layer.mlp not in ("none", "moe") for layer in layers):
                expr = (
                    f'{self.dense_mlp(required=True)} if layer_type == "{FEED_FORWARD_LAYER_TYPES["dense"]}" else None'
                )
            if any(layer.mlp == "moe" for layer in layers):
                expr = f'{moe_expression(self)} if layer_type == "{FEED_FORWARD_LAYER_TYPES["moe"]}" else {expr}'
            return expr, None
        if any(layer.mlp == "none" for layer in layers):
            self.stub("mlp_free_layers", "layers without a feed-forward block are not composed")
        moe = [layer.mlp == "moe" for layer in layers]
        if self.roles.has("moe_beside"):  # Gemma 4: experts beside every layer's dense MLP, in the same slot
            beside = moe_beside(self, self.dense_mlp(required=True))
            self.mlp_reads_residual = beside is not None
            return beside or PLACEHOLDER_MLP, None
        dense = self.dense_mlp(required=not all(moe))
        if not any(moe):
            moe_beside(self, dense)  # reads enable_moe_block, refused when true
            return dense, None
        sparse = moe_expression(self)
        if all(moe):
            return sparse, None
        moe_layer = pattern_expr(moe, repr)
        dense_first = moe.index(True)
        if moe == [False] * dense_first + [True] * (len(moe) - dense_first) and self.has_key("first_k_dense_replace"):
            # a dense prefix, as config.json's key says (DeepSeek-V3's first_k_dense_replace): read, not fixed
            moe_layer = "i >= " + self.fields.need("first_k_dense_replace", "int", str(dense_first)).replace(
                "args.", "self."
            )
        if self.has_key("expert_layer_period"):  # Jamba: one MoE layer per period, from config.json
            period, offset = (self.fields.need(k, "int", None) for k in ("expert_layer_period", "expert_layer_offset"))
            moe_layer = f"i % {period} == {offset}".replace("args.", "self.")
        return f"{sparse} if args.is_moe_layer(i) else {dense}", moe_layer

    def dense_mlp(self, required: bool) -> str:
        r, d = self.roles, self.p.dims
        gate, up, down, fused = r.get("mlp.gate"), r.get("mlp.up"), r.get("mlp.down"), r.get("mlp.gate_up")
        if not (gate or up or fused) or down is None:
            if required:
                self.stub("mlp", "no dense MLP projections recognised in the checkpoint")
            return PLACEHOLDER_MLP
        hidden = d.hidden_size
        first = fused or gate or up
        rows = first.shape[0] if first.shape and first.shape[-1] == hidden else first.shape[-1]  # type: ignore[union-attr]
        inter = rows // 2 if fused else rows
        size = self.size(inter, [("args.intermediate_size", d.intermediate_size)])
        if size == "args.intermediate_size" and self.layer_kv.mlp_width:  # Gemma 4: double-wide on KV-shared layers
            size = self.layer_kv.mlp_width
        if size == str(inter) and self.has_key("intermediate_size_mlp"):  # Llama 4: the dense layers' own width
            size = self.fields.need("intermediate_size_mlp", "int", None)
        if d.intermediate_size is None and self.has_key("intermediate_multiple_size"):
            # GPT-NeoX-Japanese sizes its MLP as hidden_size x intermediate_multiple_size (the loader checks the
            # shapes this gives against the checkpoint's)
            size = f"int(args.hidden_size * {self.fields.need('intermediate_multiple_size', 'float', None)})"
        act = self.mlp_activation()
        in_bias = r.get("mlp.gate_up" if fused else "mlp.up", "bias")
        out_bias = r.get("mlp.down", "bias")
        if bool(in_bias) != bool(out_bias) or (gate and bool(r.get("mlp.gate", "bias")) != bool(in_bias)):
            self.stub("mlp_partial_bias", f"MLP bias on some projections only: {templates(in_bias, out_bias)}")
        bias = bool(in_bias and out_bias)
        self.wm.fused_conv1d_first([up, down], [(inter, hidden), (hidden, inter)])
        target = layer_target("mlp.gate_up_proj")
        down_rule = (layer_target("mlp.down_proj.bias"), (down.source,), "copy")
        if fused or (gate and up):
            self.require_activation(GATED_ACTIVATION_NAMES, "gated")
            if fused:
                self.wm.linear(target, fused, 2 * inter, hidden)
                self.wm.bias(target, in_bias)
            else:
                self.wm.add(f"{target}.weight", (gate.source, up.source), "cat")  # type: ignore[union-attr]
                if bias:
                    self.wm.add(f"{target}.bias", (r.get("mlp.gate", "bias").source, in_bias.source), "cat")  # type: ignore[union-attr]
            self.down(down, inter, bias)
            self.words.append(f"gated MLP ({self.p.activation})")
            multipliers = ""
            if self.has_key("mlp_multipliers"):  # Falcon-H1's muP: (gate, down)
                multipliers = f", multipliers={self.fields.need('mlp_multipliers', 'list[float] | None', 'None')}"
            in_sources = (fused.source,) if fused else (gate.source, up.source)  # type: ignore[union-attr]
            switched = self.switched_bias("mlp", bias, [(f"{target}.bias", in_sources, "cat"), down_rule])
            return f"GatedMLP(args.hidden_size, {size}, {act}, bias={switched}{sub_norm(self, 'mlp')}{multipliers})"
        if gate is not None and up is None:
            self.stub("mlp", f"an MLP gate without an up projection: {gate.template}")
        self.wm.linear(layer_target("mlp.up_proj"), up, inter, hidden)  # type: ignore[arg-type]
        self.wm.bias(layer_target("mlp.up_proj"), in_bias if bias else None)
        self.down(down, inter, bias)
        act_parts = self.roles.parts("mlp.act")
        if act_parts:
            for part in act_parts:
                self.wm.add(layer_target(f"mlp.act_fn.{part.part}"), (part.source,))
            if {part.part for part in act_parts} != {"alpha_p", "alpha_n", "beta", "eps"} or bias:
                self.stub("mlp_activation", f"learned activation parameters: {templates(*act_parts)}")
            self.words.append("plain MLP with the learned xIELU activation")
            return f"XIELUMLP(args.hidden_size, {size})"
        self.require_activation(PLAIN_ACTIVATION_NAMES, "plain")
        self.words.append(f"plain MLP ({self.p.activation})")
        up_rule = (layer_target("mlp.up_proj.bias"), (up.source,), "copy")  # type: ignore[union-attr]
        return f"MLP(args.hidden_size, {size}, {act}, bias={self.switched_bias('mlp', bias, [up_rule, down_rule])})"

    def down(self, down: Found, inter: int, bias: bool) -> None:
        target = layer_target("mlp.down_proj")
        self.wm.linear(target, down, self.p.dims.hidden_size, inter)
        if bias:
            self.wm.bias(target, self.roles.get("mlp.down", "bias"))

    def require_activation(self, table: frozenset[str], kind: str) -> None:
        if self.p.activation is None and self.fact("hidden_act") in table:
            return  # the modelling code fixes it and the family fact says which (mlp_activation() reads it)
        if self.p.activation is None:  # Bloom, Ergo: the modelling code fixes it; a block default would be a guess
            self.stub(
                "activation_none",
                f"no {kind} MLP activation read from config.json (fixed in the family's "
                "modelling code, or a key the alias table lacks): the composer does not guess it",
            )
        elif self.p.activation not in table:
            self.stub(
                f"activation_{self.p.activation}",
                f"{kind} MLP activation {self.p.activation!r} is not in "
                f"onboard.blocks.mlp (known: {', '.join(sorted(table))})",
            )

    def mlp_activation(self) -> str:
        """args.hidden_act, or the activation the family's code fixes (a family fact) when config.json has none."""
        fixed = self.fact("hidden_act") if self.p.activation is None else None
        return repr(fixed) if fixed is not None else "args.hidden_act"

    def embeddings(self) -> str:
        r = self.roles
        embed = r.get("embed")
        if embed is None:
            self.stub("embeddings", "no token embedding tensor recognised")
        else:
            self.wm.add("model.embed_tokens.weight", (embed.source,))
        embedding_projections(self)
        positions = r.get("positions")
        sinusoidal = self.fact("sinusoidal_positions")
        if positions is None and "absolute_positions" in self.p.features and sinusoidal is not None:
            pad = self.fields.need("pad_token_id", "int | None", "None")
            self.positions = f"SinusoidalPositions(args.hidden_size, offset={sinusoidal}, padding_idx={pad})"
            self.words.append("sinusoidal absolute positions")
        elif positions is None and "absolute_positions" in self.p.features:
            self.stub(
                "absolute_positions",
                "absolute positions without a learned position tensor (sinusoidal or "
                "offset tables are computed in modelling code): not in the block library",
            )
        if positions is not None:
            max_pos = self.p.dims.max_position_embeddings
            offset = int(self.fact("position_offset", 0))  # type: ignore[call-overload]
            if positions.shape[:1] != ((max_pos or 0) + offset,):
                self.stub(
                    "learned_positions",
                    f"{positions.template} has {positions.shape[:1]} rows, "
                    f"max_position_embeddings is {max_pos}: an offset the blocks do not model",
                )
            self.wm.add("model.embed_positions.weight", (positions.source,))
            self.positions = f"LearnedPositions(args.max_position_embeddings, args.hidden_size, offset={offset})"
            self.words.append("learned absolute positions")
        return embedding_scale(self.p, self.fields)

    def residual(self, placement: str) -> str | None:
        scaled, keyed = "residual_scaling" in self.p.features, self.has_key("residual_multiplier")
        if keyed and placement == "pre":
            return self.fields.need("residual_multiplier", "float", "1.0")
        if self.has_key("scale_depth") and placement == "pre":  # MiniCPM: branch * scale_depth / sqrt(layers)
            depth = self.fields.need("scale_depth", "float | None", "None")
            return f"({depth} or args.num_hidden_layers**0.5) / args.num_hidden_layers**0.5"
        if scaled:
            self.stub(
                "residual_scaling",
                "residual branches scaled by a constant outside a pre-norm layer, or by a "
                "config key the blocks do not read",
            )
        elif keyed:  # 1.0 in this checkpoint (no residual_scaling feature): nothing to apply
            self.acknowledged.update(spellings("residual_multiplier"))
        return None


def compose(profile: ModelProfile) -> AdapterPlan:
    """Everything the adapter template needs for `profile`, from the profile alone (AmbiguousWeights: the names and
    shapes allow two weight maps)."""
    if not profile.tensor_templates:
        raise InputError(
            f"{profile.source or 'profile'}: no safetensors tensor names in the profile, so no weight map can be "
            f"inferred for model_type {profile.model_type!r}",
            "inspect the checkpoint with its *.safetensors files (headers are enough), then generate again",
        )
    if not profile.layers or not profile.dims.hidden_size:
        raise InputError(
            f"{profile.source or 'profile'}: no decoder layers or hidden size found for {profile.model_type!r}",
            "check config.json (num_hidden_layers, hidden_size) against the model card",
        )
    return Composer(profile).run()
