"""Classic TF1 graph programs, unchanged but for ``import dflab as tf``, checked against NumPy
references of the same computation and for convergence."""

import numpy as np

import dflab as tf


def test_linear_regression_matches_numpy_gradient_descent():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 3)).astype(np.float32)
    true_w = np.array([[2.0], [-1.0], [0.5]], np.float32)
    Y = X @ true_w + 0.3
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.float32, [None, 1])
    W = tf.Variable(tf.zeros([3, 1]))
    b = tf.Variable(tf.zeros([1]))
    pred = tf.matmul(x, W) + b
    loss = tf.reduce_mean(tf.square(pred - y))
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    w_np, b_np = np.zeros((3, 1), np.float32), np.zeros(1, np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(50):
            sess.run(train, {x: X, y: Y})
            err = X @ w_np + b_np - Y
            w_np = w_np - 0.1 * (2.0 / err.size) * X.T @ err
            b_np = b_np - 0.1 * (2.0 / err.size) * err.sum(0)
        w_got, b_got, final = sess.run([W, b, loss], {x: X, y: Y})
    np.testing.assert_allclose(w_got, w_np, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b_got, b_np, rtol=1e-4, atol=1e-5)
    assert final < 0.05


def _synthetic_mnist(n, rng):
    """MNIST-shaped data (784 features, 10 classes) that a linear model can learn."""
    centers = rng.standard_normal((10, 784)).astype(np.float32)
    labels = rng.integers(0, 10, n)
    images = centers[labels] + 0.5 * rng.standard_normal((n, 784)).astype(np.float32)
    return images, labels


def test_softmax_regression_on_mnist_shaped_data():
    rng = np.random.default_rng(1)
    images, labels = _synthetic_mnist(600, rng)
    x = tf.placeholder(tf.float32, [None, 784])
    y_ = tf.placeholder(tf.float32, [None, 10])
    W = tf.Variable(tf.zeros([784, 10]))
    b = tf.Variable(tf.zeros([10]))
    y = tf.matmul(x, W) + b
    cross_entropy = tf.reduce_mean(
        tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_, logits=y))
    train_step = tf.train.GradientDescentOptimizer(0.05).minimize(cross_entropy)
    correct = tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1))
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    onehot = np.eye(10, dtype=np.float32)[labels]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(cross_entropy, {x: images, y_: onehot})
        for i in range(30):
            batch = slice((i * 100) % 600, (i * 100) % 600 + 100)
            sess.run(train_step, {x: images[batch], y_: onehot[batch]})
        last, acc = sess.run([cross_entropy, accuracy], {x: images, y_: onehot})
    assert np.isclose(first, np.log(10), rtol=1e-5)
    assert last < first * 0.5
    assert acc > 0.9


def test_mlp_with_variable_scope_and_adam_converges():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((256, 8)).astype(np.float32)
    Y = (np.sin(X[:, :1]) + X[:, 1:2] * X[:, 2:3]).astype(np.float32)
    tf.set_random_seed(0)

    def mlp(inputs):
        h = inputs
        for i, width in enumerate([32, 32]):
            with tf.variable_scope(f"layer{i}"):
                w = tf.get_variable("w", [h.shape[1].value, width])
                b = tf.get_variable("b", [width], initializer=tf.zeros_initializer())
                h = tf.nn.relu(tf.matmul(h, w) + b)
        with tf.variable_scope("out"):
            w = tf.get_variable("w", [32, 1])
            return tf.matmul(h, w)

    x = tf.placeholder(tf.float32, [None, 8])
    y = tf.placeholder(tf.float32, [None, 1])
    with tf.variable_scope("model"):
        pred = mlp(x)
    with tf.variable_scope("model", reuse=True):
        pred_again = mlp(x)  # shares every variable
    loss = tf.reduce_mean(tf.square(pred - y))
    step = tf.train.get_or_create_global_step()
    train = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=step)
    names = sorted(v.op.name for v in tf.trainable_variables())
    assert names == sorted(["model/layer0/w", "model/layer0/b", "model/layer1/w",
                            "model/layer1/b", "model/out/w"])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: X, y: Y})
        for _ in range(300):
            sess.run(train, {x: X, y: Y})
        last, a, b_, gs = sess.run([loss, pred, pred_again, step], {x: X, y: Y})
    np.testing.assert_array_equal(a, b_)
    assert gs == 300
    assert last < first * 0.1


def test_small_cnn_trains():
    rng = np.random.default_rng(3)
    n = 64
    images = rng.standard_normal((n, 8, 8, 1)).astype(np.float32)
    labels = (images[:, :4, :, 0].mean((1, 2)) > images[:, 4:, :, 0].mean((1, 2))).astype(
        np.int64)
    x = tf.placeholder(tf.float32, [None, 8, 8, 1])
    y = tf.placeholder(tf.int64, [None])
    tf.set_random_seed(1)
    w1 = tf.Variable(tf.truncated_normal([3, 3, 1, 8], stddev=0.3))
    b1 = tf.Variable(tf.zeros([8]))
    h = tf.nn.relu(tf.nn.conv2d(x, w1, strides=[1, 1, 1, 1], padding="SAME") + b1)
    h = tf.nn.max_pool(h, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    flat = tf.reshape(h, [-1, 4 * 4 * 8])
    w2 = tf.Variable(tf.truncated_normal([128, 2], stddev=0.1))
    logits = tf.matmul(flat, w2)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = tf.train.MomentumOptimizer(0.05, 0.9).minimize(loss)
    acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: images, y: labels})
        for _ in range(60):
            sess.run(train, {x: images, y: labels})
        last, a = sess.run([loss, acc], {x: images, y: labels})
    assert last < first * 0.5
    assert a > 0.9


def test_tf_layers_program():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((128, 5)).astype(np.float32)
    Y = (X.sum(1) > 0).astype(np.int32)
    tf.set_random_seed(3)
    x = tf.placeholder(tf.float32, [None, 5])
    y = tf.placeholder(tf.int32, [None])
    h = tf.layers.dense(x, 16, activation=tf.nn.relu)
    logits = tf.layers.dense(h, 2)
    assert [v.op.name for v in tf.trainable_variables()] == [
        "dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"]
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: X, y: Y})
        for _ in range(100):
            sess.run(train, {x: X, y: Y})
        assert sess.run(loss, {x: X, y: Y}) < first * 0.2
