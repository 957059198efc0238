//! A BERT encoder forward pass over packed sequences: every text's word pieces in one
//! `(tokens, hidden)` matrix, no padding.
//!
//! candle's `BertModel` takes a padded `(batch, width)` block and spends most of its time
//! outside the matrix products (see `kernels`), on padding, and on copying transposed
//! attention tensors. Here the linear layers run once over all tokens of a call (the three
//! attention projections fused into one product), attention runs per text at its exact
//! length, reading the heads in place with strides, and the bias and residual adds are folded
//! into the products by starting each from a prefilled output. The matrix products are the
//! `gemm` crate's (what candle uses on the CPU), which picks its SIMD kernel at run time.

use rayon::prelude::*;

use super::kernels;

/// The shape numbers of a BERT model, from its `config.json`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Shape {
    pub vocab: usize,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub intermediate: usize,
    pub positions: usize,
    pub token_types: usize,
    pub eps: f32,
    pub activation: Activation,
}

/// The feed-forward activation (`hidden_act`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Activation {
    /// GELU with erf (`gelu`), what BERT and MiniLM use.
    Gelu,
    /// ReLU (`relu`).
    Relu,
}

/// `y = x · W + b`, with `W` stored `(inputs, outputs)` row-major (PyTorch's files hold its
/// transpose), so the product walks both operands along rows.
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct Layer {
    /// Query, key and value projections side by side: outputs `[q | k | v]`.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    up: Linear,
    down: Linear,
    output_norm: Norm,
}

/// Loaded weights of a BERT encoder.
pub(super) struct Encoder {
    shape: Shape,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
}

/// Returns a named tensor's values after checking its shape; see [`Encoder::load`].
pub(super) type TensorFn<'a> = dyn FnMut(&str, &[usize]) -> Result<Vec<f32>, String> + 'a;

/// One text's word pieces and their segment (token type) ids.
pub(super) struct Sequence<'a> {
    pub ids: &'a [u32],
    pub types: &'a [u32],
}

impl Encoder {
    /// Builds the encoder from `tensor(name, dims)`, which returns the named tensor's values
    /// (row-major) after checking it has the shape `dims`. Names are those of Hugging Face's
    /// `BertModel` without a prefix (`embeddings.word_embeddings.weight`, …).
    pub(super) fn load(shape: Shape, tensor: &mut TensorFn<'_>) -> Result<Self, String> {
        let h = shape.hidden;
        if shape.heads == 0 || !h.is_multiple_of(shape.heads) {
            return Err(format!(
                "hidden size {h} is not a multiple of {} attention heads",
                shape.heads
            ));
        }
        let norm = |tensor: &mut TensorFn<'_>, prefix: &str| {
            Ok::<_, String>(Norm {
                gamma: tensor(&format!("{prefix}.LayerNorm.weight"), &[h])?,
                beta: tensor(&format!("{prefix}.LayerNorm.bias"), &[h])?,
            })
        };
        let linear = |tensor: &mut TensorFn<'_>, names: &[String], inputs, outputs| {
            // Each named matrix is `(outputs, inputs)`; several are stacked side by side.
            let mut weights = Vec::new();
            let mut bias = Vec::new();
            for name in names {
                weights.push(tensor(&format!("{name}.weight"), &[outputs, inputs])?);
                bias.extend(tensor(&format!("{name}.bias"), &[outputs])?);
            }
            Ok::<_, String>(Linear::from_rows(&weights, bias, inputs))
        };
        let embedding_norm = norm(tensor, "embeddings")?;
        let mut layers = Vec::with_capacity(shape.layers);
        for l in 0..shape.layers {
            let p = format!("encoder.layer.{l}");
            let one = |name: &str| vec![format!("{p}.{name}")];
            let qkv = ["query", "key", "value"].map(|n| format!("{p}.attention.self.{n}"));
            layers.push(Layer {
                qkv: linear(tensor, &qkv, h, h)?,
                attention_out: linear(tensor, &one("attention.output.dense"), h, h)?,
                attention_norm: norm(tensor, &format!("{p}.attention.output"))?,
                up: linear(tensor, &one("intermediate.dense"), h, shape.intermediate)?,
                down: linear(tensor, &one("output.dense"), shape.intermediate, h)?,
                output_norm: norm(tensor, &format!("{p}.output"))?,
            });
        }
        Ok(Self {
            word: tensor("embeddings.word_embeddings.weight", &[shape.vocab, h])?,
            position: tensor(
                "embeddings.position_embeddings.weight",
                &[shape.positions, h],
            )?,
            token_type: tensor(
                "embeddings.token_type_embeddings.weight",
                &[shape.token_types, h],
            )?,
            embedding_norm,
            layers,
            shape,
        })
    }

    /// The last layer's hidden states of every token of every sequence, packed: the rows of
    /// sequence `i` follow those of sequence `i - 1`. Each sequence attends only to itself,
    /// so the result for a text does not depend on the others in the call.
    pub(super) fn forward(&self, sequences: &[Sequence<'_>]) -> Result<Vec<f32>, String> {
        let s = &self.shape;
        let h = s.hidden;
        for seq in sequences {
            if seq.ids.len() != seq.types.len() {
                return Err("token and segment ids differ in length".to_owned());
            }
            if seq.ids.len() > s.positions {
                return Err(format!(
                    "{} word pieces exceed the model's {} positions",
                    seq.ids.len(),
                    s.positions
                ));
            }
            if let Some(id) = seq.ids.iter().find(|&&id| id as usize >= s.vocab) {
                return Err(format!(
                    "token id {id} is outside the vocabulary of {}",
                    s.vocab
                ));
            }
            if let Some(t) = seq.types.iter().find(|&&t| t as usize >= s.token_types) {
                return Err(format!(
                    "segment id {t} is outside the model's {} token types",
                    s.token_types
                ));
            }
        }
        let lengths: Vec<usize> = sequences.iter().map(|q| q.ids.len()).collect();
        let tokens: usize = lengths.iter().sum();
        if tokens == 0 {
            return Ok(Vec::new());
        }

        // Embeddings: word + position + token type, then layer norm.
        let mut x = vec![0.0f32; tokens * h];
        let mut rows = x.chunks_exact_mut(h);
        for seq in sequences {
            for (p, (&id, &t)) in seq.ids.iter().zip(seq.types).enumerate() {
                let row = rows.next().expect("one row per token");
                let word = &self.word[id as usize * h..][..h];
                let position = &self.position[p * h..][..h];
                let token_type = &self.token_type[t as usize * h..][..h];
                for (i, out) in row.iter_mut().enumerate() {
                    *out = word[i] + position[i] + token_type[i];
                }
            }
        }
        layer_norm(&mut x, &self.embedding_norm, s.eps);

        let mut qkv = vec![0.0f32; tokens * 3 * h];
        let mut context = vec![0.0f32; tokens * h];
        let mut attended = vec![0.0f32; tokens * h];
        let mut inner = vec![0.0f32; tokens * s.intermediate];
        for layer in &self.layers {
            layer.qkv.apply(&x, &mut qkv, None);
            self.attention(&qkv, &lengths, &mut context);
            layer.attention_out.apply(&context, &mut attended, Some(&x));
            layer_norm(&mut attended, &layer.attention_norm, s.eps);
            layer.up.apply(&attended, &mut inner, None);
            match s.activation {
                Activation::Gelu => in_parallel(&mut inner, s.intermediate, kernels::gelu),
                Activation::Relu => in_parallel(&mut inner, s.intermediate, |xs| {
                    xs.iter_mut().for_each(|v| *v = v.max(0.0))
                }),
            }
            layer.down.apply(&inner, &mut x, Some(&attended));
            layer_norm(&mut x, &layer.output_norm, s.eps);
        }
        Ok(x)
    }

    /// Scaled dot-product attention of each sequence with itself, all heads, from the packed
    /// `[q | k | v]` rows into `context` (`(tokens, hidden)`, heads side by side).
    fn attention(&self, qkv: &[f32], lengths: &[usize], context: &mut [f32]) {
        let h = self.shape.hidden;
        let heads = self.shape.heads;
        let d = h / heads;
        let scale = 1.0 / (d as f32).sqrt();
        // Split the inputs and outputs per sequence so each runs on its own.
        let mut work = Vec::with_capacity(lengths.len());
        let (mut qkv, mut context) = (qkv, context);
        for &len in lengths {
            let (q, rest) = qkv.split_at(len * 3 * h);
            let (c, rest_c) = context.split_at_mut(len * h);
            work.push((len, q, c));
            qkv = rest;
            context = rest_c;
        }
        work.into_par_iter().for_each(|(len, qkv, context)| {
            if len == 0 {
                // A tokenizer without special tokens can give an empty text no word pieces.
                return;
            }
            let mut scores = vec![0.0f32; len * len];
            for head in 0..heads {
                let at = head * d;
                // scores = Q_h · K_hᵀ · scale
                matmul(
                    Out::new(&mut scores, len, len, len),
                    In::new(&qkv[at..], len, d, 3 * h, 1),
                    In::new(&qkv[h + at..], d, len, 1, 3 * h),
                    scale,
                    false,
                    false,
                );
                kernels::softmax_rows(&mut scores, len);
                // context_h = P · V_h
                matmul(
                    Out::new(&mut context[at..], len, d, h),
                    In::new(&scores, len, len, len, 1),
                    In::new(&qkv[2 * h + at..], len, d, 3 * h, 1),
                    1.0,
                    false,
                    false,
                );
            }
        });
    }
}

impl Linear {
    /// Stacks weight matrices given as `(outputs, inputs)` row-major (PyTorch's layout) into
    /// one transposed `(inputs, Σ outputs)` matrix.
    fn from_rows(weights: &[Vec<f32>], bias: Vec<f32>, inputs: usize) -> Self {
        let outputs = bias.len();
        let mut weight = vec![0.0f32; inputs * outputs];
        let mut column = 0;
        for w in weights {
            let rows = w.len() / inputs;
            for (o, row) in w.chunks_exact(inputs).enumerate() {
                for (i, &value) in row.iter().enumerate() {
                    weight[i * outputs + column + o] = value;
                }
            }
            column += rows;
        }
        Self {
            weight,
            bias,
            inputs,
            outputs,
        }
    }

    /// `out = input · W + b (+ residual)` for every row of `input`.
    fn apply(&self, input: &[f32], out: &mut [f32], residual: Option<&[f32]>) {
        let rows = input.len() / self.inputs;
        let out = &mut out[..rows * self.outputs];
        // Start from the bias (and residual): the product is accumulated onto it.
        match residual {
            Some(residual) => {
                let residual = &residual[..rows * self.outputs];
                in_parallel_zip(out, residual, self.outputs, |o, r| {
                    for (row, res) in o
                        .chunks_exact_mut(self.outputs)
                        .zip(r.chunks_exact(self.outputs))
                    {
                        for ((y, &b), &r) in row.iter_mut().zip(&self.bias).zip(res) {
                            *y = b + r;
                        }
                    }
                });
            }
            None => {
                for row in out.chunks_exact_mut(self.outputs) {
                    row.copy_from_slice(&self.bias);
                }
            }
        }
        matmul(
            Out::new(out, rows, self.outputs, self.outputs),
            In::new(input, rows, self.inputs, self.inputs, 1),
            In::new(&self.weight, self.inputs, self.outputs, self.outputs, 1),
            1.0,
            true,
            true,
        );
    }
}

fn layer_norm(xs: &mut [f32], norm: &Norm, eps: f32) {
    in_parallel(xs, norm.gamma.len(), |rows| {
        kernels::layer_norm(rows, &norm.gamma, &norm.beta, eps)
    });
}

/// Rows per parallel task of the element-wise steps: enough work to pay for the task.
const ROWS_PER_TASK: usize = 64;

/// Runs `f` over blocks of whole `width`-wide rows of `xs` on the thread pool.
fn in_parallel(xs: &mut [f32], width: usize, f: impl Fn(&mut [f32]) + Sync + Send) {
    xs.par_chunks_mut(width * ROWS_PER_TASK).for_each(f);
}

fn in_parallel_zip(
    xs: &mut [f32],
    ys: &[f32],
    width: usize,
    f: impl Fn(&mut [f32], &[f32]) + Sync + Send,
) {
    xs.par_chunks_mut(width * ROWS_PER_TASK)
        .zip(ys.par_chunks(width * ROWS_PER_TASK))
        .for_each(|(x, y)| f(x, y));
}

/// A row-major output block: `rows × cols` with `row_stride` between rows.
struct Out<'a> {
    data: &'a mut [f32],
    rows: usize,
    cols: usize,
    row_stride: usize,
}

impl<'a> Out<'a> {
    fn new(data: &'a mut [f32], rows: usize, cols: usize, row_stride: usize) -> Self {
        Self {
            data,
            rows,
            cols,
            row_stride,
        }
    }
}

/// A strided input matrix: element `(r, c)` is `data[r * row_stride + c * col_stride]`.
struct In<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl<'a> In<'a> {
    fn new(
        data: &'a [f32],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Self {
        Self {
            data,
            rows,
            cols,
            row_stride,
            col_stride,
        }
    }

    /// Whether every element the strides reach lies inside `data`.
    fn fits(&self) -> bool {
        self.rows == 0
            || self.cols == 0
            || (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride
                < self.data.len()
    }
}

/// `out = scale · a · b` (`accumulate`: `out += scale · a · b`), on the thread pool when
/// `parallel`. The shapes and strides are checked against the slices, so the raw-pointer call
/// below never reads or writes outside them.
fn matmul(out: Out<'_>, a: In<'_>, b: In<'_>, scale: f32, accumulate: bool, parallel: bool) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(
        b.rows == k && out.rows == m && out.cols == n,
        "matmul shapes"
    );
    assert!(a.fits() && b.fits(), "matmul inputs out of bounds");
    assert!(
        m == 0 || n == 0 || (m - 1) * out.row_stride + n <= out.data.len(),
        "matmul output out of bounds"
    );
    if m == 0 || n == 0 {
        return;
    }
    let parallelism = if parallel && rayon::current_num_threads() > 1 {
        gemm::Parallelism::Rayon(rayon::current_num_threads())
    } else {
        gemm::Parallelism::None
    };
    // SAFETY: the asserts above keep every index the strides reach inside the slices; the
    // output is borrowed mutably and so cannot alias the inputs.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.data.as_mut_ptr(),
            1,
            out.row_stride as isize,
            accumulate,
            a.data.as_ptr(),
            a.col_stride as isize,
            a.row_stride as isize,
            b.data.as_ptr(),
            b.col_stride as isize,
            b.row_stride as isize,
            1.0,
            scale,
            false,
            false,
            false,
            parallelism,
        );
    }
}
