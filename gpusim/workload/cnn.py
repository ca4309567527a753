"""Convolutional networks (ResNet v1.5, VGG-16, Inception-v3, SSD300, Mask R-CNN): one small
shape-propagation builder, :class:`_Net`, and a function per architecture (conventions in
:mod:`gpusim.workload.core`; sources in the catalogue data files and each docstring)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpusim.workload.core import (ACT_BYTES, COCO_JPEG_BYTES, IMAGENET_JPEG_BYTES, IMAGENET_PREPROCESS_CORE_S,
                                  INDEX_BYTES, LOSS_BYTES, MASK_BYTES, MASKRCNN_PREPROCESS_CORE_S,
                                  SSD_PREPROCESS_CORE_S, WEIGHT_BYTES, Workload, Groups, image_pipeline)
from gpusim.workload.transformer import EntryInfo

@dataclass(frozen=True)
class _T:
    """An activation tensor of one sample: ``n`` instances (RoIs) of ``c x h x w``."""

    c: int
    h: int
    w: int
    n: float
    id: int

    @property
    def numel(self) -> float:
        return self.n * self.c * self.h * self.w


def _pair(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


class _Net:
    """Propagates shapes through conv/bn/relu/pool/linear/add/cat and accumulates, per sample:
    parameters, layer groups (kind x stage), and the bytes each op keeps for its backward pass.

    Saved bytes are counted once per tensor. ``begin_block``/``end_block`` mark checkpoint segments
    (a bottleneck, an Inception module ...)."""

    def __init__(self):
        self.params = 0.0
        self.param_tensors = 0  # [issue 18] weight, bias, batch-norm weight and bias: one tensor each
        self.groups = Groups()
        self.stage = "stem"
        self._next = 0
        self._saved: dict[int, tuple[float, str | None]] = {}
        self._extra: list[tuple[float, str | None]] = []
        self._block: str | None = None
        self._block_inputs = 0.0
        self._nblocks = 0

    # -- bookkeeping ---------------------------------------------------------------------------------
    def _new(self, c: int, h: int, w: int, n: float = 1.0) -> _T:
        self._next += 1
        if c < 1 or h < 1 or w < 1:
            raise ValueError(f"shape collapsed to {c}x{h}x{w} in stage {self.stage}")
        return _T(int(c), int(h), int(w), float(n), self._next)

    def _save(self, t: _T) -> None:
        if t.id not in self._saved:
            self._saved[t.id] = (ACT_BYTES * t.numel, self._block)

    def _save_bytes(self, b: float) -> None:
        self._extra.append((b, self._block))

    def begin_block(self, x: _T) -> None:
        self._nblocks += 1
        self._block = f"b{self._nblocks}"
        self._block_inputs += ACT_BYTES * x.numel

    def end_block(self) -> None:
        self._block = None

    def act_bytes(self) -> float:
        return sum(b for b, _ in self._saved.values()) + sum(b for b, _ in self._extra)

    def _per_block(self) -> tuple[float, float]:
        """(saved bytes outside blocks, saved bytes of the largest block)."""
        per_block: dict[str | None, float] = {}
        for b, blk in [*self._saved.values(), *self._extra]:
            per_block[blk] = per_block.get(blk, 0.0) + b
        outside = per_block.pop(None, 0.0)
        return outside, max(per_block.values(), default=0.0)

    def act_ckpt_bytes(self) -> float:
        return self._block_inputs + self._per_block()[0]

    def act_block_bytes(self) -> float:
        return self._per_block()[1]

    # -- ops -----------------------------------------------------------------------------------------
    def input(self, c: int, h: int, w: int) -> _T:
        return self._new(c, h, w)

    def conv(self, x: _T, cout: int, k: int | tuple[int, int], s: int = 1, p: int | tuple[int, int] = 0,
             bias: bool = False, groups: int = 1, transposed: bool = False) -> _T:
        kh, kw = _pair(k)
        ph, pw = _pair(p)
        if transposed:   # stride-s transposed conv with k == s (Mask R-CNN's upsampler)
            ho, wo = (x.h - 1) * s - 2 * ph + kh, (x.w - 1) * s - 2 * pw + kw
        else:
            ho, wo = (x.h + 2 * ph - kh) // s + 1, (x.w + 2 * pw - kw) // s + 1
        y = self._new(cout, ho, wo, x.n)
        n_p = (x.c // groups) * kh * kw * cout + (cout if bias else 0)
        self.params += n_p
        self.param_tensors += 2 if bias else 1
        flop = 2.0 * (x.c // groups) * kh * kw * cout * (x.h * x.w if transposed else ho * wo) * x.n
        self.groups.add("conv", f"conv {self.stage}", 1, flop, ACT_BYTES * (x.numel + y.numel), WEIGHT_BYTES * n_p)
        self._save(x)
        return y

    def bn(self, x: _T, frozen: bool = False) -> _T:
        """Batch norm in training mode (reads its input twice: statistics, then normalise), or a frozen
        one (a per-channel affine with buffers, as detection backbones use)."""
        y = self._new(x.c, x.h, x.w, x.n)
        if frozen:
            self.groups.add("elementwise", f"elementwise {self.stage}", 1, 0.0, ACT_BYTES * 2 * x.numel)
            return y
        self.params += 2 * x.c
        self.param_tensors += 2
        self.groups.add("norm", f"batchnorm {self.stage}", 1, 0.0, ACT_BYTES * 3 * x.numel, WEIGHT_BYTES * 2 * x.c)
        self._save(x)
        return y

    def relu(self, x: _T) -> _T:
        """In-place ReLU: keeps its output (the same tensor the next conv keeps)."""
        self.groups.add("elementwise", f"elementwise {self.stage}", 1, 0.0, ACT_BYTES * 2 * x.numel)
        self._save(x)
        return x

    def cbr(self, x: _T, cout: int, k: int | tuple[int, int], s: int = 1, p: int | tuple[int, int] = 0,
            relu: bool = True, frozen_bn: bool = False) -> _T:
        y = self.bn(self.conv(x, cout, k, s, p), frozen=frozen_bn)
        return self.relu(y) if relu else y

    def maxpool(self, x: _T, k: int, s: int, p: int = 0) -> _T:
        y = self._new(x.c, (x.h + 2 * p - k) // s + 1, (x.w + 2 * p - k) // s + 1, x.n)
        self.groups.add("pool", f"pool {self.stage}", 1, 0.0, ACT_BYTES * (x.numel + y.numel) + INDEX_BYTES * y.numel)
        self._save(x)
        self._save_bytes(INDEX_BYTES * y.numel)
        return y

    def avgpool(self, x: _T, k: int, s: int, p: int = 0) -> _T:
        y = self._new(x.c, (x.h + 2 * p - k) // s + 1, (x.w + 2 * p - k) // s + 1, x.n)
        self.groups.add("pool", f"pool {self.stage}", 1, 0.0, ACT_BYTES * (x.numel + y.numel))
        return y

    def gap(self, x: _T) -> _T:
        """Global average pooling (keeps nothing: its backward needs only the shape)."""
        y = self._new(x.c, 1, 1, x.n)
        self.groups.add("pool", f"pool {self.stage}", 1, 0.0, ACT_BYTES * (x.numel + y.numel))
        return y

    def linear(self, x: _T, out: int, bias: bool = True) -> _T:
        fan_in = x.c * x.h * x.w
        y = self._new(out, 1, 1, x.n)
        n_p = fan_in * out + (out if bias else 0)
        self.params += n_p
        self.param_tensors += 2 if bias else 1
        self.groups.add("matmul", f"linear {self.stage}", 1, 2.0 * fan_in * out * x.n,
                        ACT_BYTES * (x.numel + y.numel), WEIGHT_BYTES * n_p)
        self._save(x)
        return y

    def add(self, a: _T, b: _T) -> _T:
        y = self._new(a.c, a.h, a.w, a.n)
        self.groups.add("elementwise", f"elementwise {self.stage}", 1, 0.0, ACT_BYTES * 3 * a.numel)
        return y

    def cat(self, xs: Sequence[_T]) -> _T:
        y = self._new(sum(x.c for x in xs), xs[0].h, xs[0].w, xs[0].n)
        self.groups.add("elementwise", f"elementwise {self.stage}", 1, 0.0, ACT_BYTES * 2 * y.numel)
        return y

    def dropout(self, x: _T) -> _T:
        y = self._new(x.c, x.h, x.w, x.n)
        self.groups.add("elementwise", f"elementwise {self.stage}", 1, 0.0,
                        ACT_BYTES * 2 * x.numel + MASK_BYTES * x.numel)
        self._save_bytes(MASK_BYTES * x.numel)
        return y

    def upsample2x(self, x: _T, h: int, w: int) -> _T:
        y = self._new(x.c, h, w, x.n)
        self.groups.add("elementwise", f"elementwise {self.stage}", 1, 0.0, ACT_BYTES * (x.numel + y.numel))
        return y

    def roi_align(self, levels: Sequence[_T], out_hw: int, n_rois: float) -> _T:
        """Multi-scale RoIAlign: ``n_rois`` crops of ``c x out_hw x out_hw`` per image, bilinear with
        2x2 samples per bin (reads ~4 values per output), one kernel per pyramid level."""
        y = self._new(levels[0].c, out_hw, out_hw, n_rois)
        self.groups.add("pool", f"pool {self.stage}", len(levels), 0.0, ACT_BYTES * 5 * y.numel)
        return y

    def loss(self, n_logits: float, count: int, extra_bytes: float = 0.0) -> None:
        """A softmax/BCE loss over ``n_logits`` values per sample, computed in fp32."""
        self.groups.add("elementwise", f"loss {self.stage}", count, 0.0,
                        n_logits * (ACT_BYTES + 3 * LOSS_BYTES) + extra_bytes)
        self._save_bytes(LOSS_BYTES * n_logits)

    def other(self, name: str, count: int, bytes_: float) -> None:
        self.groups.add("other", name, count, 0.0, bytes_)

    def workload(self, info: EntryInfo, pipeline: dict[str, float]) -> Workload:
        return Workload(id=info.id, name=info.name, family=info.family, sample_unit="image",
                        tokens_per_sample=1.0, params=self.params, fwd_flop_per_sample=self.groups.total_flop(),
                        act_bytes_per_sample=self.act_bytes(), act_ckpt_bytes_per_sample=self.act_ckpt_bytes(),
                        act_block_bytes_per_sample=self.act_block_bytes(),
                        layers=self.groups.build(), sources=info.sources, notes=info.notes,
                        param_tensors=self.param_tensors or None, **pipeline)


def _bottleneck(net: _Net, x: _T, width: int, stride: int, downsample: bool, frozen_bn: bool = False) -> _T:
    """ResNet v1.5 bottleneck (stride on the 3x3 conv, as in NVIDIA DLE and torchvision)."""
    net.begin_block(x)
    y = net.cbr(x, width, 1, frozen_bn=frozen_bn)
    y = net.cbr(y, width, 3, stride, 1, frozen_bn=frozen_bn)
    y = net.cbr(y, 4 * width, 1, relu=False, frozen_bn=frozen_bn)
    sc = net.cbr(x, 4 * width, 1, stride, relu=False, frozen_bn=frozen_bn) if downsample else x
    out = net.relu(net.add(y, sc))
    net.end_block()
    return out


def _resnet_trunk(net: _Net, x: _T, blocks: Sequence[int], n_stages: int = 4,
                  strides: Sequence[int] = (1, 2, 2, 2), frozen_bn: bool = False) -> list[_T]:
    """Stem + the first ``n_stages`` stages; returns each stage's output."""
    net.stage = "stem"
    x = net.cbr(x, 64, 7, 2, 3, frozen_bn=frozen_bn)
    x = net.maxpool(x, 3, 2, 1)
    outs = []
    cin = 64
    for i in range(n_stages):
        width = 64 * 2 ** i
        net.stage = f"layer{i + 1}"
        for j in range(blocks[i]):
            x = _bottleneck(net, x, width, strides[i] if j == 0 else 1,
                            downsample=(j == 0 and (strides[i] != 1 or cin != 4 * width)), frozen_bn=frozen_bn)
            cin = 4 * width
        outs.append(x)
    return outs


def build_resnet(info: EntryInfo, blocks: Sequence[int], image: int = 224) -> Workload:
    """ResNet-50/101 v1.5 (He et al. 2016 Table 1; stride-2 on the 3x3 conv as in NVIDIA DLE v1.5)."""
    net = _Net()
    x = net.input(3, image, image)
    x = _resnet_trunk(net, x, blocks)[-1]
    net.stage = "head"
    x = net.linear(net.gap(x), 1000)
    net.loss(1000, 3)
    return net.workload(info, image_pipeline(IMAGENET_JPEG_BYTES, 3, image, image, 1.0, IMAGENET_PREPROCESS_CORE_S))


def build_vgg16(info: EntryInfo) -> Workload:
    """VGG-16, configuration D of Simonyan & Zisserman 2015 (Table 1), no batch norm, 224x224."""
    net = _Net()
    x = net.input(3, 224, 224)
    cfg = [[64, 64], [128, 128], [256, 256, 256], [512, 512, 512], [512, 512, 512]]
    for i, widths in enumerate(cfg):
        net.stage = f"block{i + 1}"
        net.begin_block(x)
        for c in widths:
            x = net.relu(net.conv(x, c, 3, 1, 1, bias=True))
        x = net.maxpool(x, 2, 2)
        net.end_block()
    net.stage = "classifier"
    x = net.dropout(net.relu(net.linear(x, 4096)))
    x = net.dropout(net.relu(net.linear(x, 4096)))
    net.linear(x, 1000)
    net.loss(1000, 3)
    return net.workload(info, image_pipeline(IMAGENET_JPEG_BYTES, 3, 224, 224, 1.0, IMAGENET_PREPROCESS_CORE_S))


def build_inception_v3(info: EntryInfo) -> Workload:
    """Inception-v3 (Szegedy et al. 2016, Table 1 and Figures 5-7) at 299x299 with the auxiliary
    classifier active in training. Module widths as in the reference implementations (Mixed_5b..7c);
    every conv is conv (no bias) + BN + ReLU."""
    net = _Net()

    def c(x, cout, k, s=1, p=0):
        return net.cbr(x, cout, k, s, p)

    x = net.input(3, 299, 299)
    net.stage = "stem"
    x = c(x, 32, 3, 2)
    x = c(x, 32, 3)
    x = c(x, 64, 3, 1, 1)
    x = net.maxpool(x, 3, 2)
    x = c(x, 80, 1)
    x = c(x, 192, 3)
    x = net.maxpool(x, 3, 2)
    net.stage = "35x35"
    for pool_feat in (32, 64, 64):           # Mixed_5b, 5c, 5d (module A, Fig. 5)
        net.begin_block(x)
        b1 = c(x, 64, 1)
        b5 = c(c(x, 48, 1), 64, 5, 1, 2)
        b3 = c(c(c(x, 64, 1), 96, 3, 1, 1), 96, 3, 1, 1)
        bp = c(net.avgpool(x, 3, 1, 1), pool_feat, 1)
        x = net.cat([b1, b5, b3, bp])
        net.end_block()
    net.begin_block(x)                        # Mixed_6a (grid reduction)
    b3 = c(x, 384, 3, 2)
    b3d = c(c(c(x, 64, 1), 96, 3, 1, 1), 96, 3, 2)
    x = net.cat([b3, b3d, net.maxpool(x, 3, 2)])
    net.end_block()
    net.stage = "17x17"
    for c7 in (128, 160, 160, 192):          # Mixed_6b..6e (module B, Fig. 6, n = 7)
        net.begin_block(x)
        b1 = c(x, 192, 1)
        b7 = c(c(c(x, c7, 1), c7, (1, 7), 1, (0, 3)), 192, (7, 1), 1, (3, 0))
        bd = c(x, c7, 1)
        bd = c(bd, c7, (7, 1), 1, (3, 0))
        bd = c(bd, c7, (1, 7), 1, (0, 3))
        bd = c(bd, c7, (7, 1), 1, (3, 0))
        bd = c(bd, 192, (1, 7), 1, (0, 3))
        bp = c(net.avgpool(x, 3, 1, 1), 192, 1)
        x = net.cat([b1, b7, bd, bp])
        net.end_block()
    net.stage = "aux"                         # auxiliary classifier on the 17x17 grid
    a = net.avgpool(x, 5, 3)
    a = c(a, 128, 1)
    a = c(a, 768, 5)
    net.linear(net.gap(a), 1000)
    net.loss(1000, 3)
    net.stage = "17x17"
    net.begin_block(x)                        # Mixed_7a (grid reduction)
    b3 = c(c(x, 192, 1), 320, 3, 2)
    b7 = c(c(c(c(x, 192, 1), 192, (1, 7), 1, (0, 3)), 192, (7, 1), 1, (3, 0)), 192, 3, 2)
    x = net.cat([b3, b7, net.maxpool(x, 3, 2)])
    net.end_block()
    net.stage = "8x8"
    for _ in range(2):                        # Mixed_7b, 7c (module C, Fig. 7)
        net.begin_block(x)
        b1 = c(x, 320, 1)
        b3 = c(x, 384, 1)
        b3 = net.cat([c(b3, 384, (1, 3), 1, (0, 1)), c(b3, 384, (3, 1), 1, (1, 0))])
        bd = c(c(x, 448, 1), 384, 3, 1, 1)
        bd = net.cat([c(bd, 384, (1, 3), 1, (0, 1)), c(bd, 384, (3, 1), 1, (1, 0))])
        bp = c(net.avgpool(x, 3, 1, 1), 192, 1)
        x = net.cat([b1, b3, bd, bp])
        net.end_block()
    net.stage = "head"
    x = net.dropout(net.gap(x))
    net.linear(x, 1000)
    net.loss(1000, 3)
    return net.workload(info, image_pipeline(IMAGENET_JPEG_BYTES, 3, 299, 299, 1.0, IMAGENET_PREPROCESS_CORE_S))


def build_ssd300(info: EntryInfo) -> Workload:
    """SSD300 with a ResNet-50 backbone as in NVIDIA DLE ``ssd/model.py``: the ResNet-50 stem and
    layers 1-3 with the first block of layer 3 at stride 1 (38x38x1024 from a 300x300 input), five
    extra blocks (1x1 conv + BN + ReLU, 3x3 conv + BN + ReLU) down to 1x1, and 3x3 localisation
    (4 per box) and confidence (81 classes per box) heads on the six maps with [4, 6, 6, 6, 4, 4]
    default boxes per cell: 8732 boxes."""
    net = _Net()
    x = net.input(3, 300, 300)
    feats = [_resnet_trunk(net, x, (3, 4, 6), n_stages=3, strides=(1, 2, 1))[-1]]
    net.stage = "extra"
    mids = (256, 256, 128, 128, 128)
    outs = (512, 512, 256, 256, 256)
    x = feats[0]
    for i, (mid, out) in enumerate(zip(mids, outs)):
        net.begin_block(x)
        y = net.cbr(x, mid, 1)
        x = net.cbr(y, out, 3, 2, 1) if i < 3 else net.cbr(y, out, 3, 1, 0)
        net.end_block()
        feats.append(x)
    net.stage = "heads"
    n_boxes = 0
    for nd, fm in zip((4, 6, 6, 6, 4, 4), feats):
        net.conv(fm, nd * 4, 3, 1, 1, bias=True)
        net.conv(fm, nd * 81, 3, 1, 1, bias=True)
        n_boxes += nd * fm.h * fm.w
    net.groups.add("elementwise", "elementwise heads", 4, 0.0, ACT_BYTES * 2 * 2 * n_boxes * 85)  # reshape+cat
    net.loss(n_boxes * 81, 12, extra_bytes=LOSS_BYTES * n_boxes * 4 * 6)
    net.other("hard negative mining (sorts)", 6, n_boxes * (LOSS_BYTES + INDEX_BYTES) * 4)
    # uint8 image is copied by DALI/the native loader after decode; boxes+labels encoded per default box
    pipe = image_pipeline(COCO_JPEG_BYTES, 3, 300, 300, 4.0, SSD_PREPROCESS_CORE_S,
                           extra_h2d_bytes=n_boxes * (4 * 4 + 8))
    return net.workload(info, pipe)


def build_mask_rcnn(info: EntryInfo, height: int = 800, width: int = 1088, rois: int = 512,
                    mask_rois: int = 128) -> Workload:
    """Mask R-CNN with a ResNet-50-FPN backbone (He et al. 2017; Lin et al. 2017), training, one image
    of ``height x width`` (COCO images resized to an 800-pixel short side, padded to a multiple of 32).

    Approximations: frozen batch norm in the backbone (its affine is elementwise, no parameters), all
    backbone stages trainable for the FLOP count; the RPN head runs on P2-P6 (3 anchors per cell);
    ``rois`` sampled proposals per image go through RoIAlign (7x7) and the two-FC box head; the mask
    head (4 conv3x3 + deconv + 1x1 to 81 classes at 28x28) runs on ``mask_rois`` positive RoIs (the
    cap set by a 25% positive fraction of 512). Anchor decoding, top-k, NMS and box matching are
    lumped into one ``other`` group of ~200 small kernels."""
    net = _Net()
    x = net.input(3, height, width)
    c2, c3, c4, c5 = _resnet_trunk(net, x, (3, 4, 6, 3), frozen_bn=True)
    net.stage = "fpn"
    lat = [net.conv(c, 256, 1, bias=True) for c in (c2, c3, c4, c5)]
    tops = [lat[3]]
    for lt in reversed(lat[:3]):
        tops.insert(0, net.add(lt, net.upsample2x(tops[0], lt.h, lt.w)))
    ps = [net.conv(t, 256, 3, 1, 1, bias=True) for t in tops]
    ps.append(net.maxpool(ps[-1], 1, 2))      # P6 by subsampling P5
    net.stage = "rpn"
    n_anchors = 0
    for p in ps:
        t = net.relu(net.conv(p, 256, 3, 1, 1, bias=True))
        net.conv(t, 3, 1, bias=True)
        net.conv(t, 12, 1, bias=True)
        n_anchors += 3 * p.h * p.w
    # the shared RPN conv has one set of weights: undo the four extra copies counted above
    net.params -= 4 * (9 * 256 * 256 + 256 + 256 * 3 + 3 + 256 * 12 + 12)
    net.loss(n_anchors, 6, extra_bytes=LOSS_BYTES * n_anchors * 4 * 4)
    net.other("anchors, top-k, NMS, matching", 200, n_anchors * 5 * LOSS_BYTES * 8)
    net.stage = "box head"
    r = net.roi_align(ps[:4], 7, rois)
    r = net.relu(net.linear(r, 1024))
    r = net.relu(net.linear(r, 1024))
    net.linear(r, 81)
    net.linear(r, 81 * 4)
    net.loss(rois * 81, 4, extra_bytes=LOSS_BYTES * rois * 4 * 4)
    net.stage = "mask head"
    m = net.roi_align(ps[:4], 14, mask_rois)
    for _ in range(4):
        m = net.relu(net.conv(m, 256, 3, 1, 1, bias=True))
    m = net.relu(net.conv(m, 256, 2, 2, bias=True, transposed=True))
    net.conv(m, 81, 1, bias=True)
    net.loss(mask_rois * 28 * 28, 4)          # BCE on the ground-truth class's mask only
    pipe = image_pipeline(COCO_JPEG_BYTES, 3, height, width, 4.0, MASKRCNN_PREPROCESS_CORE_S)
    return net.workload(info, pipe)


