// Merged into @jupyter/builder's config. Module ids by order of use ("natural") instead of hashes of
// module names: the container entry's name holds absolute paths, which made the prebuilt output
// depend on the checkout's location (the committed kstream_nb/labextension/ must rebuild identically).
module.exports = {
  optimization: {
    moduleIds: 'natural'
  }
};
